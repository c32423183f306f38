// Network emulation (see emulated_comm.hpp).
#include "emulated_comm.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace kformer::comm {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(Clock::time_point t0, double us) {
  return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(us));
}

// Sleeps through most of the wait, then yields until the deadline: a plain sleep_until wakes up
// to Linux's 50 us timer slack late, which showed up as alpha = 113 us for an emulated 50 us.
// Yielding rather than spinning leaves the core to other ranks of an oversubscribed node.
void hold_until(Clock::time_point deadline) {
  const auto margin = std::chrono::microseconds(200);
  if (Clock::now() + margin < deadline) std::this_thread::sleep_until(deadline - margin);
  while (Clock::now() < deadline) std::this_thread::yield();
}

class DelayedRequest final : public Request::Impl {
 public:
  DelayedRequest(Request inner, Clock::time_point deadline) : inner_(std::move(inner)), deadline_(deadline) {}
  bool test() override { return inner_.test() && Clock::now() >= deadline_; }
  void wait() override {
    inner_.wait();
    hold_until(deadline_);
  }
  // The emulated network holds the call until its deadline: the device's span ends there too.
  std::optional<DeviceSpan> device_span() const override {
    std::optional<DeviceSpan> s = inner_.device_span();
    if (s) s->end_us = std::max(s->end_us, std::chrono::duration<double, std::micro>(deadline_.time_since_epoch()).count());
    return s;
  }

 private:
  Request inner_;
  Clock::time_point deadline_;
};

}  // namespace

EmulatedComm::EmulatedComm(std::unique_ptr<Communicator> inner, NetworkModel model)
    : ForwardingCommunicator(std::move(inner)), model_(model) {
  check_network_model(model_);
}

std::unique_ptr<Communicator> EmulatedComm::split(int color, int key) {
  return std::make_unique<EmulatedComm>(inner_->split(color, key), model_);
}

// Each call fences the compute queued before it first (fence_compute): the modelled time runs
// from when the call can start, not from a post that still waits for kernels.
void EmulatedComm::barrier() {
  inner_->fence_compute(true);
  const auto t0 = Clock::now();
  inner_->barrier();
  hold_until(deadline_after(t0, modelled_barrier_us(model_, size())));
}

void EmulatedComm::run(const Op& op) {
  inner_->fence_compute(true);
  const auto t0 = Clock::now();
  inner_->run(op);
  hold_until(deadline_after(t0, modelled_time_us(model_, op, size())));
}

Request EmulatedComm::start(const Op& op) {
  inner_->fence_compute(false);
  const auto t0 = Clock::now();
  Request r = inner_->start(op);
  return Request(std::make_unique<DelayedRequest>(std::move(r), deadline_after(t0, modelled_time_us(model_, op, size()))));
}

Request EmulatedComm::start_group(const std::vector<Op>& ops) {
  inner_->fence_compute(false);
  const auto t0 = Clock::now();
  Request r = inner_->start_group(ops);
  return Request(
      std::make_unique<DelayedRequest>(std::move(r), deadline_after(t0, modelled_group_time_us(model_, ops, size()))));
}

}  // namespace kformer::comm
