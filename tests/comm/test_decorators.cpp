// The decorators around each backend under test: with network emulation every call lasts at
// least the modelled alpha-beta time (a lower bound only: an oversubscribed machine may always
// be slower), and tracing records every call with its op, bytes, group and times.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "comm/emulated_comm.hpp"
#include "comm/traced_comm.hpp"
#include "conformance.hpp"

namespace kformer::test {
namespace {

double elapsed_us(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_P(CommConformance, EmulatedCallsLastAtLeastTheModelledTime) {
  if (size == 1) GTEST_SKIP() << "one rank sends nothing: the model gives 0 (unit-tested)";
  const comm::NetworkModel net{1500.0, 2.0};  // 1.5 ms, 2 Gbit/s
  comm::EmulatedComm e(std::move(c), net);
  const std::size_t n = 32768;  // 128 KiB of float
  auto x = to_buf(values<float>(rank, n));
  Buf<float> all = make_buf<float>("all", n * size);

  auto t0 = std::chrono::steady_clock::now();
  comm::allreduce(e, x, comm::ReduceOp::sum);
  const double ar = comm::modelled_time_us(net, comm::OpKind::allreduce, n * sizeof(float), size);
  EXPECT_GE(elapsed_us(t0), ar);

  t0 = std::chrono::steady_clock::now();
  comm::Request r = comm::iallgather(e, x, all);
  r.wait();
  EXPECT_GE(elapsed_us(t0), comm::modelled_time_us(net, comm::OpKind::allgather, n * size * sizeof(float), size));

  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  Buf<float> in = make_buf<float>("in", n);
  const std::vector<comm::Op> ring = {comm::send_op(x, right), comm::recv_op(in, left)};
  t0 = std::chrono::steady_clock::now();
  e.group(ring);
  EXPECT_GE(elapsed_us(t0), comm::modelled_group_time_us(net, ring, size));

  t0 = std::chrono::steady_clock::now();
  e.barrier();
  EXPECT_GE(elapsed_us(t0), net.latency_us);
  // The emulation delays; it does not change results.
  EXPECT_EQ(to_vec(in)[1], reduced<float>(size, 1, comm::ReduceOp::sum));
}

TEST_P(CommConformance, TracingRecordsEveryCall) {
  auto log = std::make_shared<comm::TraceLog>();
  comm::TracedComm t(std::move(c), log);
  const double before = comm::TraceLog::now_us();
  auto x = to_buf(values<double>(rank, 10));
  Buf<double> all = make_buf<double>("all", 10 * size);
  comm::allreduce(t, x, comm::ReduceOp::max);
  comm::Request r = comm::iallgather(t, x, all);
  EXPECT_EQ(log->records().back().end_us, -1.0);  // open until seen complete
  r.wait();
  t.barrier();
  auto half = t.split(rank < 1 ? 0 : 1, rank);
  comm::broadcast(*half, x, 0);
  const double after = comm::TraceLog::now_us();

  const auto& recs = log->records();
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[0].op, "allreduce");
  EXPECT_EQ(recs[0].bytes, 80u);
  EXPECT_TRUE(recs[0].blocking);
  EXPECT_EQ(recs[1].op, "allgather");
  EXPECT_EQ(recs[1].bytes, 80u * size);
  EXPECT_FALSE(recs[1].blocking);
  EXPECT_EQ(recs[2].op, "barrier");
  EXPECT_EQ(recs[3].op, "broadcast");
  EXPECT_EQ(recs[3].group_size, half->size());
  EXPECT_NE(recs[3].comm_id, recs[0].comm_id);  // the split child writes to the same log
  for (std::size_t i = 0; i < recs.size(); ++i) {
    EXPECT_EQ(recs[i].group_size, i == 3 ? half->size() : size);
    EXPECT_GE(recs[i].start_us, before);
    EXPECT_GE(recs[i].end_us, recs[i].start_us);
    EXPECT_LE(recs[i].end_us, after);
    if (i > 0) EXPECT_GE(recs[i].start_us, recs[i - 1].end_us);  // one call after the other
  }
  EXPECT_GT(log->busy_us(), 0.0);
  EXPECT_LE(log->busy_us(), after - before);
}

}  // namespace kformer::test
