// comm.strict's rules, each shown catching a call that the same backend accepts without it:
// host memory (a stack scalar, a std::vector, an unmanaged View over host memory, a range past a
// View's end, and in a CPU build a HostSpace View or a host mirror, which share the device's
// memory space there) is refused with one line naming the call and its caller; an ungrouped exchange with
// oneself, which NCCL would deadlock on, is reported. (Across ranks the deadlock is caught by the
// watchdog: strict_exchange_test.sh.)
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "comm/allocation_registry.hpp"
#include "conformance.hpp"

namespace kformer::test {
namespace {

bool is_strict(const comm::Communicator& c) { return c.backend().rfind("strict(", 0) == 0; }
bool is_nccl(const comm::Communicator& c) { return c.backend().find("nccl") != std::string::npos; }

// The message of the std::invalid_argument `call` throws, or "" when it throws none.
template <class F>
std::string refusal(F&& call) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_P(CommConformance, StrictRefusesHostBuffersNamingCallAndCaller) {
  if (is_nccl(*c) && !is_strict(*c)) GTEST_SKIP() << "NCCL refuses host memory itself (nccl_comm.cpp require_device)";
  double x = 1.0;  // on the stack: NCCL could not read it
  std::vector<float> v(8, 1.0f);
  Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> wrapped(v.data(), v.size());
  if (!is_strict(*c)) {
    // Without the rule the host backends take all of them: the rule is what refuses them below.
    c->allreduce(&x, &x, 1, comm::DType::f64, comm::ReduceOp::sum);
    comm::allreduce(*c, wrapped, comm::ReduceOp::sum);
    EXPECT_EQ(x, double(size));
    EXPECT_EQ(v[3], float(size));
    return;
  }
  const std::string m = refusal([&] { c->allreduce(&x, &x, 1, comm::DType::f64, comm::ReduceOp::sum); });
  EXPECT_NE(m.find("comm.strict: allreduce of 8 B (float64)"), std::string::npos) << m;
  EXPECT_NE(m.find("called at comm/test_strict.cpp:"), std::string::npos) << "names the caller: " << m;
  EXPECT_NE(m.find("send buffer"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
  EXPECT_NE(refusal([&] { comm::allreduce(*c, wrapped, comm::ReduceOp::sum); }), "");
  Buf<float> b = make_buf<float>("b", 16);
  EXPECT_NE(refusal([&] { c->allgather(v.data(), b.data(), 1, comm::DType::f32); }), "") << "a std::vector";
  EXPECT_NE(refusal([&] { c->allgather(b.data(), v.data(), 1, comm::DType::f32); }), "") << "received into host memory";
  // A View's own range passes; the same length one element further does not.
  EXPECT_EQ(refusal([&] { c->allreduce(b.data(), b.data(), 16, comm::DType::f32, comm::ReduceOp::sum); }), "");
  EXPECT_EQ(refusal([&] { c->allreduce(b.data() + 4, b.data() + 4, 12, comm::DType::f32, comm::ReduceOp::sum); }), "");
  const std::string past =
      refusal([&] { c->allreduce(b.data() + 1, b.data() + 1, 16, comm::DType::f32, comm::ReduceOp::sum); });
  EXPECT_NE(past.find("not inside a live allocation"), std::string::npos) << past;
}

// Host Views that a CPU build cannot tell from device memory by their space (HostSpace is the
// device's space there): a managed HostSpace View and a create_mirror of a device View. Under
// NCCL on a GPU both are host memory; comm.strict refuses them on the CPU too, because only
// comm::device_view records a device allocation (allocation_registry.hpp). A create_mirror_view
// of a device View is that View itself in a CPU build (no copy), so it is not among them.
TEST_P(CommConformance, StrictRefusesHostViewsOnEveryBuild) {
  if (is_nccl(*c) && !is_strict(*c)) GTEST_SKIP() << "NCCL refuses host memory itself (nccl_comm.cpp require_device)";
  Kokkos::View<float*, Kokkos::HostSpace> host("host_staging", 8);
  const auto mirror = Kokkos::create_mirror(make_buf<float>("device", 8));
  Kokkos::deep_copy(host, 1.0f);
  Kokkos::deep_copy(mirror, 1.0f);
  if (!is_strict(*c)) {
    // Host backends move host memory: only the rule refuses these.
    comm::allreduce(*c, host, comm::ReduceOp::sum);
    comm::allreduce(*c, mirror, comm::ReduceOp::sum);
    EXPECT_EQ(host(7), float(size));
    EXPECT_EQ(mirror(7), float(size));
    return;
  }
  const std::string m = refusal([&] { comm::allreduce(*c, host, comm::ReduceOp::sum); });
  EXPECT_NE(m.find("comm.strict: allreduce of 32 B (float32)"), std::string::npos) << m;
  EXPECT_NE(m.find("called at comm/test_strict.cpp:"), std::string::npos) << "names the caller: " << m;
  if (comm::AllocationRegistry::space_is_host())  // the CPU build: it is a live allocation, of the host
    EXPECT_NE(m.find("lies in the host View 'host_staging'"), std::string::npos) << m;
  EXPECT_NE(refusal([&] { comm::allreduce(*c, mirror, comm::ReduceOp::sum); }), "") << "a host mirror";
  const auto dev = make_buf<float>("recv", 8 * std::size_t(size));
  EXPECT_NE(refusal([&] { comm::allgather(*c, host, dev); }), "") << "sent from a host View";
  EXPECT_EQ(refusal([&] { comm::allgather(*c, make_buf<float>("send", 8), dev); }), "")
      << "the same call from a device View passes";
}

TEST_P(CommConformance, StrictReportsAnUngroupedExchangeWithOneself) {
  if (size != 1 || is_nccl(*c) || c->backend().find("self") == std::string::npos)
    GTEST_SKIP() << "one rank of the self backend: across ranks the watchdog reports it (strict_exchange_test.sh)";
  auto out = to_buf(values<float>(0, 33));
  Buf<float> in = make_buf<float>("in", 33);
  // Send, then receive, outside a group: NCCL's send waits for a receive queued behind it.
  auto exchange = [&] {
    comm::Request s = comm::isend(*c, out, 0);
    comm::recv(*c, in, 0);
    s.wait();
  };
  if (!is_strict(*c)) {
    exchange();  // the mailbox buffers the send: fine here, a deadlock under NCCL
    EXPECT_EQ(to_vec(in), values<float>(0, 33));
    return;
  }
  try {
    exchange();
    FAIL() << "an ungrouped send-then-receive with oneself was accepted under comm.strict";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL would deadlock"), std::string::npos) << e.what();
  }
  c->group({comm::send_op(out, 0), comm::recv_op(in, 0)});  // the fix: one group
  EXPECT_EQ(to_vec(in), values<float>(0, 33));
}

}  // namespace kformer::test
