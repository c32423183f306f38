// output.kernel_times: the time of every kernel call of a run's steps, measured. Each call of a
// kernel entry point (kernels/call_record.hpp's Call: kformer's own kernels and the vendor calls,
// cuBLAS, cuDNN, behind them) is fenced before it begins and after it ends, so that on a GPU its
// time is the device's, launch included, and each call's time is its own (a call made inside
// another counts for itself, not for the outer one). The fences take away the overlap of launches
// with the device's work, so a timed step runs longer than an untimed one: the report keeps the
// timed steps' own length beside the calls', and the time outside every call (communication, the
// host's own work) is their difference. Summed per step by entry point and by kernel family, the
// families predict.breakdown prints, so that a measured step and its prediction read side by side.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>

#include "call_record.hpp"

namespace kformer {

struct KernelTime {
  std::string name, family;
  double calls = 0, ms = 0;  // over every timed step
  double top_calls = 0;      // of the calls, those not made inside another call (the step's own)
};

class KernelTimes final : public kernels::CallTimer {
 public:
  void begin(const char* name, kernels::Family family) override;
  void end() override;
  // A timed step of `step_ms` (its wall time, fences and all) is over.
  void step_done(double step_ms);

  int steps() const { return steps_; }
  double step_ms() const { return steps_ ? step_ms_ / steps_ : 0.0; }       // a timed step, on average
  std::vector<KernelTime> entries() const;                                  // per step, longest first
  std::map<std::string, double> family_ms() const;                          // per step
  double calls_ms() const;                                                  // per step, every call

 private:
  struct Open {
    std::size_t entry;
    double start_s, inner_s;
  };
  std::vector<KernelTime> entries_;
  std::map<std::pair<std::string, std::string>, std::size_t> index_;
  std::vector<Open> open_;
  int steps_ = 0;
  double step_ms_ = 0;
};

// The calls made during the scope's lifetime are timed by `times` (nothing when it is null).
class TimingCalls {
 public:
  explicit TimingCalls(KernelTimes* times) : previous_(kernels::call_timer_slot()) {
    if (times) kernels::call_timer_slot() = times;
  }
  ~TimingCalls() { kernels::call_timer_slot() = previous_; }
  TimingCalls(const TimingCalls&) = delete;
  TimingCalls& operator=(const TimingCalls&) = delete;

 private:
  kernels::CallTimer* previous_;
};

}  // namespace kformer
