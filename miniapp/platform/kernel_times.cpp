// Kernel calls timed between fences (see kernel_times.hpp).
#include "platform/kernel_times.hpp"

#include <algorithm>
#include <chrono>

namespace kformer {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

void KernelTimes::begin(const char* name, kernels::Family family) {
  Kokkos::fence();  // what came before is done: the call's time starts here
  const auto key = std::make_pair(std::string(name), std::string(kernels::family_name(family)));
  auto it = index_.find(key);
  if (it == index_.end()) {
    it = index_.emplace(key, entries_.size()).first;
    entries_.push_back({key.first, key.second});
  }
  open_.push_back({it->second, now_s(), 0.0});
}

void KernelTimes::end() {
  Kokkos::fence();  // the call's work is done
  const double now = now_s();
  const Open o = open_.back();
  open_.pop_back();
  const double whole = now - o.start_s;
  KernelTime& e = entries_[o.entry];
  e.calls += 1;
  if (open_.empty()) e.top_calls += 1;
  e.ms += (whole - o.inner_s) * 1e3;  // its own time: the calls inside it count for themselves
  if (!open_.empty()) open_.back().inner_s += whole;
}

void KernelTimes::step_done(double step_ms) {
  ++steps_;
  step_ms_ += step_ms;
}

std::vector<KernelTime> KernelTimes::entries() const {
  std::vector<KernelTime> out = entries_;
  const double n = std::max(steps_, 1);
  for (KernelTime& e : out) e.calls /= n, e.top_calls /= n, e.ms /= n;
  std::sort(out.begin(), out.end(), [](const KernelTime& a, const KernelTime& b) { return a.ms > b.ms; });
  return out;
}

std::map<std::string, double> KernelTimes::family_ms() const {
  std::map<std::string, double> out;
  for (const KernelTime& e : entries_) out[e.family] += e.ms / std::max(steps_, 1);
  return out;
}

double KernelTimes::calls_ms() const {
  double sum = 0;
  for (const KernelTime& e : entries_) sum += e.ms;
  return sum / std::max(steps_, 1);
}

}  // namespace kformer
