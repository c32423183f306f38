// Communication is ordered with the compute around it without the caller fencing: what a kernel
// still queued when a call is posted writes is what is sent, and the kernel queued right after
// the call returns (blocking) or completes (non-blocking) reads the result. On a GPU this holds
// the NCCL backend's events between the compute stream and its own communication stream. A
// backend that times calls on the device reports a span inside the call's post and completion.
#include <gtest/gtest.h>

#include "comm/trace_log.hpp"
#include "conformance.hpp"

namespace kformer::test {
namespace {

// Outside any test body: CUDA's device lambdas may not live in a private member function, and
// GoogleTest's TestBody is one. Neither fences: the kernels may still be queued on return.
void fill_queued(const Buf<float>& a, int rank) {
  Kokkos::parallel_for(
      "fill_queued", Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace>(0, a.extent(0)),
      KOKKOS_LAMBDA(const int i) { a(i) = static_cast<float>((rank + 1) * (1 + i % 7)); });
}

void double_queued(const Buf<float>& in, const Buf<float>& out) {
  Kokkos::parallel_for(
      "double_queued", Kokkos::RangePolicy<Kokkos::DefaultExecutionSpace>(0, in.extent(0)),
      KOKKOS_LAMBDA(const int i) { out(i) = 2.0f * in(i); });
}

}  // namespace

TEST_P(CommConformance, CallsOrderAfterQueuedComputeAndBeforeTheNext) {
  const std::size_t n = std::size_t(1) << 20;  // a kernel long enough to be still queued on a GPU
  Buf<float> a = make_buf<float>("a", n);
  Buf<float> b = make_buf<float>("b", n);
  Buf<float> out = make_buf<float>("out", n);
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
  for (const bool nonblocking : {false, true}) {
    fill_queued(a, rank);
    if (nonblocking) {
      const double posted = comm::TraceLog::now_us();
      comm::Request r = comm::iallreduce(*c, a, b, comm::ReduceOp::sum);
      r.wait();
      const double seen = comm::TraceLog::now_us();
      if (c->backend() == "nccl") EXPECT_TRUE(r.device_span().has_value()) << "nccl times calls with events";
      if (const auto& s = r.device_span()) {
        // The host and device clocks are matched to a few microseconds; 1 ms of slack.
        EXPECT_GE(s->start_us, posted - 1e3);
        EXPECT_LE(s->start_us, s->end_us);
        EXPECT_LE(s->end_us, seen + 1e3);
      }
    } else {
      comm::allreduce(*c, a, b, comm::ReduceOp::sum);
    }
    double_queued(b, out);
    const auto got = to_vec(out);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += got[i] != 2.0f * ranks_sum * static_cast<float>(1 + i % 7);
    EXPECT_EQ(wrong, 0u) << (nonblocking ? "non-blocking" : "blocking");
  }
}

}  // namespace kformer::test
