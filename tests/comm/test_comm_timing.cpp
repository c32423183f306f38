// Honest communication time (issue 15): the decorators that time a call fence the compute queued
// before it first, so a record never contains kernels that were still running; a device span a
// backend measured (nccl's CUDA events) reaches the trace through every decorator and replaces the
// host span in the busy time. A scripted backend stands in for the GPU: its fence_compute stamps
// the clock, its non-blocking calls report a device span.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/runtime.hpp"
#include "comm/trace_log.hpp"

using namespace kformer::comm;

namespace {

// A backend that moves nothing but remembers when it was fenced and with what. It claims two
// ranks, since the emulation models no time for one.
class ScriptedComm final : public Communicator {
 public:
  struct Fence {
    bool blocking;
    double at_us;
  };
  std::vector<Fence> fences;
  double device_start_offset_us = 0, device_length_us = 0;  // of every non-blocking call, from its post

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "scripted"; }
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<ScriptedComm>(); }
  void barrier() override {}
  void fence_compute(bool blocking) override { fences.push_back({blocking, TraceLog::now_us()}); }
  void run(const Op&) override {}
  Request start(const Op&) override { return started(); }
  Request start_group(const std::vector<Op>&) override { return started(); }

 private:
  class Timed final : public Request::Impl {
   public:
    explicit Timed(DeviceSpan s) : s_(s) {}
    bool test() override { return true; }
    void wait() override {}
    std::optional<DeviceSpan> device_span() const override { return s_; }

   private:
    DeviceSpan s_;
  };
  Request started() {
    const double t = TraceLog::now_us() + device_start_offset_us;
    return Request(std::make_unique<Timed>(DeviceSpan{t, t + device_length_us}));
  }
};

}  // namespace

TEST(TraceLog, DeviceSpanReplacesTheHostSpanInBusyTime) {
  TraceLog log;
  // Two buckets posted at 0 and 10, both seen complete at 100 (the wait at the end of the
  // backward); on the device they ran 20-30 and 40-60: 30 us of communication, not 100.
  const std::size_t a = log.open({"allreduce", 0, 2, 0, false, 0, 0});
  const std::size_t b = log.open({"allreduce", 0, 2, 0, false, 10, 0});
  log.close(a, 100);
  log.close(b, 100);
  EXPECT_DOUBLE_EQ(log.busy_us(), 100.0);
  log.set_device_span(a, 20, 30);
  log.set_device_span(b, 40, 60);
  EXPECT_DOUBLE_EQ(log.busy_us(), 30.0);
  EXPECT_TRUE(log.records()[a].has_device_span());
  // Clock skew cannot put the call before its post or after its completion was seen.
  log.set_device_span(b, 5, 130);
  EXPECT_DOUBLE_EQ(log.records()[b].device_start_us, 10.0);
  EXPECT_DOUBLE_EQ(log.records()[b].device_end_us, 100.0);
  // A record without a device span keeps its host span.
  const std::size_t c = log.open({"recv", 0, 2, 0, true, 200, 0});
  log.close(c, 210);
  EXPECT_FALSE(log.records()[c].has_device_span());
  EXPECT_DOUBLE_EQ(log.records()[c].busy_start_us(), 200.0);
}

TEST(TracedComm, FencesComputeBeforeTheRecordOpens) {
  auto backend = std::make_unique<ScriptedComm>();
  ScriptedComm* raw = backend.get();
  auto log = std::make_shared<TraceLog>();
  WorldOptions o;
  o.trace = log;
  o.emulate = {1.0, 0.0};  // the emulation and the watchdog sit between tracing and the backend
  o.timeout_s = 60;
  auto comm = decorate(std::move(backend), o);
  float x = 0;
  comm->allreduce(&x, &x, 1, DType::f32, ReduceOp::sum);
  comm->barrier();
  Request r = comm->iallreduce(&x, &x, 1, DType::f32, ReduceOp::sum);
  r.wait();
  ASSERT_EQ(log->records().size(), 3u);
  // Tracing and emulation each fence once per call, blocking calls as blocking.
  ASSERT_EQ(raw->fences.size(), 6u);
  const bool expected_blocking[] = {true, true, true, true, false, false};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(raw->fences[i].blocking, expected_blocking[i]) << "fence " << i;
  // Each record opens after the tracer's fence (the first of the call's pair) has returned.
  for (int i = 0; i < 3; ++i) EXPECT_GE(log->records()[i].start_us, raw->fences[2 * i].at_us) << "record " << i;
}

TEST(TracedComm, DeviceSpanReachesTheTraceThroughTheDecorators) {
  auto backend = std::make_unique<ScriptedComm>();
  backend->device_start_offset_us = 0;
  backend->device_length_us = 0;  // ends at once: the emulated deadline decides the end
  auto log = std::make_shared<TraceLog>();
  WorldOptions o;
  o.trace = log;
  o.emulate = {2000.0, 0.0};  // 2 ms latency
  o.timeout_s = 60;
  auto comm = decorate(std::move(backend), o);
  float x = 0;
  Request r = comm->iallreduce(&x, &x, 1, DType::f32, ReduceOp::sum);
  r.wait();
  ASSERT_TRUE(r.device_span().has_value());
  const TraceRecord& rec = log->records().at(0);
  ASSERT_TRUE(rec.has_device_span());
  // The emulated network holds the call 2 ms from its post: the device span lasts that long too.
  EXPECT_GE(rec.device_end_us - rec.device_start_us, 2000.0 - 1.0);
  EXPECT_LE(rec.device_end_us, rec.end_us);
  EXPECT_GE(rec.device_start_us, rec.start_us);
}
