// The injected straggler (see straggler.hpp).
#include "train/straggler.hpp"

#include <chrono>
#include <thread>

namespace kformer {

Stretch stretch_if_straggler(const StragglerSettings& s, int world_rank, double busy_ms) {
  Stretch out;
  if (s.rank != world_rank || s.slowdown <= 1) return out;
  out.added_ms = (s.slowdown - 1) * busy_ms;
  const auto from = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(out.added_ms));
  out.slept_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count();
  return out;
}

}  // namespace kformer
