// The trace record list (see trace_log.hpp).
#include "trace_log.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace kformer::comm {

double TraceLog::now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

std::size_t TraceLog::open(TraceRecord r) {
  r.end_us = -1.0;
  records_.push_back(std::move(r));
  return records_.size() - 1;
}

void TraceLog::close(std::size_t index, double end_us) {
  // Guards against a clear() issued while a call was in flight (see clear()).
  if (index < records_.size()) records_[index].end_us = end_us;
}

void TraceLog::set_device_span(std::size_t index, double start_us, double end_us) {
  if (index >= records_.size()) return;  // cleared while in flight (see clear())
  TraceRecord& r = records_[index];
  if (r.end_us < r.start_us) return;  // not closed: no host span to hold it
  const double hi = std::clamp(end_us, r.start_us, r.end_us);
  r.device_start_us = std::clamp(start_us, r.start_us, hi);
  r.device_end_us = hi;
}

double TraceLog::busy_us() const {
  std::vector<std::pair<double, double>> spans;
  for (const auto& r : records_)
    if (r.end_us >= r.start_us) spans.emplace_back(r.busy_start_us(), r.busy_end_us());
  std::sort(spans.begin(), spans.end());
  double total = 0.0, lo = 0.0, hi = 0.0;
  bool have = false;
  for (const auto& [s, e] : spans) {
    if (have && s <= hi) {
      hi = std::max(hi, e);
      continue;
    }
    if (have) total += hi - lo;
    lo = s;
    hi = e;
    have = true;
  }
  return have ? total + (hi - lo) : 0.0;
}

}  // namespace kformer::comm
