// Pieces of comm/ that need no other rank: the alpha-beta model against its formula, the
// Hockney fit on exact data, the trace log's busy time, Request semantics, the self backend's
// mailbox, and the factory's refusals.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "comm/allocation_registry.hpp"
#include "comm/alpha_beta.hpp"
#include "comm/backend_choice.hpp"
#include "comm/device_view.hpp"
#include "comm/stream_queue.hpp"
#include "comm/runtime.hpp"
#include "comm/self_comm.hpp"
#include "comm/trace_log.hpp"
#include "comm/views.hpp"
#include "kformer_config.hpp"
#include "test_env.hpp"

using namespace kformer::comm;

TEST(AlphaBeta, BusFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::allreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::allreduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::allgather, 3), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(OpKind::send, 2), 1.0);
}

TEST(AlphaBeta, ModelledTimeIsLatencyPlusBusBytesOverBandwidth) {
  const NetworkModel net{10.0, 1.0};  // 10 us, 1 Gbit/s = 125 bytes/us
  // allreduce of 1 MB on 4 ranks: 1.5 MB on the bus.
  EXPECT_DOUBLE_EQ(modelled_time_us(net, OpKind::allreduce, 1000000, 4), 10.0 + 1.5e6 / 125.0);
  EXPECT_DOUBLE_EQ(modelled_time_us(net, OpKind::allgather, 1000000, 4), 10.0 + 0.75e6 / 125.0);
  EXPECT_DOUBLE_EQ(modelled_time_us(net, OpKind::broadcast, 1000, 2), 10.0 + 8.0);
  // The Op form counts reduce_scatter's bytes as nccl-tests does: the whole send buffer.
  Op rs{OpKind::reduce_scatter, nullptr, nullptr, 250, DType::f32, ReduceOp::sum, 0};
  EXPECT_EQ(op_bytes(rs, 4), 4000u);
  EXPECT_DOUBLE_EQ(modelled_time_us(net, rs, 4), 10.0 + 3000.0 / 125.0);
  // 0 bandwidth = unlimited; one rank sends nothing.
  EXPECT_DOUBLE_EQ(modelled_time_us({7.0, 0.0}, OpKind::allreduce, 1 << 30, 2), 7.0);
  EXPECT_DOUBLE_EQ(modelled_time_us(net, OpKind::allreduce, 1 << 20, 1), 0.0);
  EXPECT_DOUBLE_EQ(modelled_barrier_us(net, 3), 10.0);
  // A group: one latency, the larger direction.
  std::vector<Op> g = {Op::send_to(nullptr, 1000, DType::f64, 1), Op::recv_from(nullptr, 500, DType::f64, 1),
                       Op::recv_from(nullptr, 100, DType::f32, 1)};
  EXPECT_DOUBLE_EQ(modelled_group_time_us(net, g, 2), 10.0 + 8000.0 / 125.0);
  EXPECT_FALSE(NetworkModel{}.enabled());
  EXPECT_TRUE((NetworkModel{0.0, 5.0}.enabled()));
}

TEST(AlphaBeta, NegativeSettingsNameTheDeckKey) {
  try {
    check_network_model({-1.0, 0.0});
    FAIL() << "negative latency accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("comm.emulate.latency_us"), std::string::npos);
  }
  EXPECT_THROW(check_network_model({0.0, std::nan("")}), std::runtime_error);
}

TEST(AlphaBeta, HockneyFitRecoversExactParameters) {
  std::vector<double> bytes, times;
  for (double b = 8; b <= 268435456.0; b *= 4) {
    bytes.push_back(b);
    times.push_back(12.5 + b / (3.2 * 1e3));  // alpha 12.5 us, beta 3.2 GB/s
  }
  const HockneyFit f = fit_hockney(bytes, times);
  EXPECT_NEAR(f.alpha_us, 12.5, 1e-6);
  EXPECT_NEAR(f.beta_gbytes_per_s, 3.2, 1e-9);
  EXPECT_EQ(f.points, bytes.size());
  EXPECT_NEAR(f.predict_us(1e6), 12.5 + 1e6 / 3200.0, 1e-6);
  // Time that does not grow with size: infinite bandwidth, alpha the constant.
  const HockneyFit flat = fit_hockney({8, 64, 512}, {5, 5, 5});
  EXPECT_TRUE(std::isinf(flat.beta_gbytes_per_s));
  EXPECT_NEAR(flat.alpha_us, 5.0, 1e-9);
  EXPECT_THROW(fit_hockney({64, 64}, {1, 2}), std::invalid_argument);
  EXPECT_THROW(fit_hockney({64}, {1, 2}), std::invalid_argument);
}

TEST(TraceLog, BusyTimeCountsOverlapOnce) {
  TraceLog log;
  auto add = [&](double s, double e) { log.close(log.open({"x", 0, 2, 0, false, s, 0}), e); };
  add(0, 10);
  add(5, 15);   // overlaps the first
  add(20, 30);  // separate
  log.open({"open", 0, 2, 0, false, 40, 0});  // never completed: not counted
  EXPECT_DOUBLE_EQ(log.busy_us(), 25.0);
  EXPECT_EQ(log.records().size(), 4u);
  EXPECT_EQ(log.records()[3].end_us, -1.0);
}

TEST(CallSite, DescribeNamesFileLineAndFunctionWithoutTemplateArguments) {
  EXPECT_EQ(describe(CallSite{"/build/x/miniapp/trainer.cpp", 154, "iterate"}),
            "miniapp/trainer.cpp:154 in iterate");
  // GCC spells a template's arguments in __builtin_FUNCTION; the watchdog line keeps the name.
  EXPECT_EQ(describe(CallSite{"miniapp/device_reduce.cpp", 15,
                                          "reduce_through<double, Kokkos::View<double*> >"}),
            "miniapp/device_reduce.cpp:15 in reduce_through");
  EXPECT_EQ(describe(CallSite{}), "");
}

TEST(Request, DefaultIsCompleteAndWaitIsIdempotent) {
  Request r;
  EXPECT_TRUE(r.done());
  EXPECT_TRUE(r.test());
  r.wait();
  r.wait();
}

TEST(SelfComm, MailboxDeliversInPostingOrderAndRefusesDeadlock) {
  SelfComm c;
  int a = 1, b = 2, x = 0, y = 0;
  c.send(&a, 1, DType::i32, 0);  // buffered: a blocking send to oneself returns
  Request rb = c.isend(&b, 1, DType::i32, 0);
  c.recv(&x, 1, DType::i32, 0);
  c.recv(&y, 1, DType::i32, 0);
  EXPECT_EQ(x, 1);
  EXPECT_EQ(y, 2);
  Request orphan = c.irecv(&x, 1, DType::i32, 0);
  EXPECT_FALSE(orphan.test());
  EXPECT_THROW(orphan.wait(), std::logic_error);
  SelfComm fresh;  // (in `c` the orphan receive is still posted and would take the next send)
  double d = 0;
  fresh.isend(&d, 1, DType::f64, 0).wait();
  EXPECT_THROW(fresh.recv(&x, 1, DType::i32, 0), std::invalid_argument);  // 8 bytes sent, 4 expected
}

TEST(SelfComm, ViewsMustBeRowMajorContiguous) {
  SelfComm c;
  Kokkos::View<float**, Kokkos::LayoutLeft, Kokkos::HostSpace> left("left", 3, 2);
  EXPECT_THROW(allreduce(c, left, ReduceOp::sum), std::invalid_argument);
  Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> right("right", 3, 2), out("out", 3, 2);
  right(2, 1) = 4.0f;
  allreduce(c, right, out, ReduceOp::sum);
  EXPECT_EQ(out(2, 1), 4.0f);
  Kokkos::View<float*, Kokkos::LayoutLeft, Kokkos::HostSpace> vec("vec", 5);  // rank 1: any layout is flat
  allreduce(c, vec, ReduceOp::max);
}

// comm.backend=auto: NCCL exactly when the build has it and the ranks are on GPUs (so an NCCL
// build on GPUs does not stage every collective through the host), MPI otherwise, self without
// MPI; a named backend is kept. Every branch from plain facts, the GPU one included.
TEST(BackendChoice, AutoPicksNcclOnlyForAnNcclBuildOnGpus) {
  for (int world : {1, 4}) {
    EXPECT_EQ(choose_backend("auto", true, true, true, world).backend, "nccl") << world;
    EXPECT_EQ(choose_backend("auto", true, true, false, world).backend, "mpi") << "an NCCL build on host ranks";
    EXPECT_EQ(choose_backend("auto", false, true, true, world).backend, "mpi") << "a CUDA build without NCCL";
    EXPECT_EQ(choose_backend("auto", false, true, false, world).backend, "mpi") << "a CPU build, as before auto";
  }
  EXPECT_EQ(choose_backend("auto", false, false, false, 1).backend, "self");
  EXPECT_EQ(choose_backend("auto", false, true, false, 4).reason, "no NCCL in this build");
  EXPECT_EQ(choose_backend("auto", true, true, false, 4).reason, "ranks not on GPUs");
  EXPECT_EQ(choose_backend("auto", true, true, true, 4).reason, "NCCL build, ranks on GPUs");
  for (const char* named : {"self", "mpi", "nccl"}) {
    const BackendChoice kept = choose_backend(named, true, true, true, 2);
    EXPECT_EQ(kept.backend, named);
    EXPECT_EQ(kept.reason, "as asked");
  }
  // This build: a CPU build resolves to what its default was before auto (mpi, self without MPI).
  if (!KFORMER_ENABLE_NCCL)
    EXPECT_EQ(resolve_backend("auto", 1).backend, KFORMER_ENABLE_MPI ? "mpi" : "self");
  EXPECT_EQ(make_world("auto", kformer::test::runtime())->backend(), resolve_backend("auto", 1).backend);
}

TEST(Runtime, FactoryRefusalsNameTheFix) {
  auto& rt = kformer::test::runtime();
  try {
    make_world("gloo", rt);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("valid are auto, self, mpi, nccl"), std::string::npos);
  }
  if (!KFORMER_ENABLE_NCCL) {
    try {
      make_world("nccl", rt);
      FAIL();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("not compiled into this build"), std::string::npos);
    }
  }
  WorldOptions bad;
  bad.emulate.bandwidth_gbps = -3;
  EXPECT_THROW(make_world("self", rt, bad), std::runtime_error);
  WorldOptions both;
  both.emulate = {5.0, 0.0};
  both.trace = std::make_shared<TraceLog>();
  EXPECT_EQ(make_world("self", rt, both)->backend(), "traced(emulated(self))");
}

// The registry comm.strict checks buffers against: Views of the execution space's memory, while
// they live, and nothing else.
TEST(AllocationRegistry, KnowsLiveViewsAndNothingElse) {
  ASSERT_TRUE(AllocationRegistry::installed());  // test_main installs it before any View
  using Mem = Kokkos::DefaultExecutionSpace::memory_space;
  const void* gone = nullptr;
  {
    Kokkos::View<double*, Mem> v("kformer_registry_test", 100);
    std::string label;
    EXPECT_TRUE(AllocationRegistry::contains(v.data(), 800, &label));
    EXPECT_EQ(label, "kformer_registry_test");
    EXPECT_TRUE(AllocationRegistry::contains(v.data() + 99, 8));
    EXPECT_FALSE(AllocationRegistry::contains(v.data() + 99, 16)) << "one element past the end";
    EXPECT_FALSE(AllocationRegistry::contains(reinterpret_cast<const char*>(v.data()) - 1, 8)) << "before the data";
    gone = v.data();
  }
  EXPECT_FALSE(AllocationRegistry::contains(gone, 8)) << "a freed View";
  double on_stack = 0;
  std::vector<float> heap(64);
  EXPECT_FALSE(AllocationRegistry::contains(&on_stack, sizeof on_stack));
  EXPECT_FALSE(AllocationRegistry::contains(heap.data(), 4));
}

// Which live allocations are device memory: those made by device_view (inside a DeviceScope, which
// nests and ends with its scope); in a CPU build a View of the same space made directly, or a
// create_mirror, is a host buffer (on a GPU it would be one).
TEST(AllocationRegistry, TellsDeviceAllocationsFromHostViews) {
  using Mem = Kokkos::DefaultExecutionSpace::memory_space;
  using V = Kokkos::View<float*, Mem>;
  const auto dev = device_view<V>("kformer_registry_device", 10);
  V plain("kformer_registry_plain", 10);
  const auto copy = Kokkos::create_mirror(dev);  // always a new host allocation
  std::string label;
  EXPECT_TRUE(AllocationRegistry::contains_device(dev.data(), 40, &label));
  EXPECT_EQ(label, "kformer_registry_device");
  EXPECT_FALSE(AllocationRegistry::contains_device(dev.data() + 1, 40)) << "one element past the end";
  if (AllocationRegistry::space_is_host()) {
    EXPECT_TRUE(AllocationRegistry::contains(plain.data(), 40)) << "still a live allocation of the space";
    EXPECT_FALSE(AllocationRegistry::contains_device(plain.data(), 40)) << "made outside device_view";
    EXPECT_FALSE(AllocationRegistry::contains_device(copy.data(), 40)) << "a host mirror";
  } else {
    EXPECT_TRUE(AllocationRegistry::contains_device(plain.data(), 40)) << "device memory whoever made it";
  }
  {
    const AllocationRegistry::DeviceScope outer;
    {
      const AllocationRegistry::DeviceScope inner;
    }
    V nested("kformer_registry_nested", 4);
    EXPECT_TRUE(AllocationRegistry::contains_device(nested.data(), 16)) << "the outer scope still holds";
  }
  V after("kformer_registry_after", 4);
  EXPECT_EQ(AllocationRegistry::contains_device(after.data(), 16), !AllocationRegistry::space_is_host())
      << "the scope ended with its block";
}

// The emulated stream: calls complete in the order they were made, and nothing is posted before
// the call ahead of it has completed.
TEST(StreamQueue, PostsEachCallOnlyAfterTheOneBefore) {
  Kokkos::View<float*, Kokkos::DefaultExecutionSpace::memory_space> a("a", 4), b("b", 4);
  SelfComm self(/*rendezvous=*/true);
  auto q = std::make_shared<StreamQueue>();
  Request send = q->enqueue(self, {Op::send_to(a.data(), 4, DType::f32, 0)}, false);
  Request recv = q->enqueue(self, {Op::recv_from(b.data(), 4, DType::f32, 0)}, false);
  EXPECT_FALSE(recv.test()) << "the receive sits behind the send it would match";
  EXPECT_THROW(send.wait(), std::logic_error) << "a send nobody receives, with nothing else to run";
  recv.wait();  // its turn now: it takes the message the failed send left in place
  Request grouped = q->enqueue(self, {Op::send_to(a.data(), 4, DType::f32, 0), Op::recv_from(b.data(), 4, DType::f32, 0)}, true);
  EXPECT_TRUE(grouped.test()) << "a group's members progress together";
}
