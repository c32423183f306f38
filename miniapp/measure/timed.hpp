// The time of a call on the run's execution space, as start-up and calibrate measure kernels: the
// mean over calls repeated for at least a window after a warm-up. A sustained rate, which on a
// node whose cores other processes share includes the time the scheduler gives away, as a run's
// longer phases do (a median of a few short calls would not).
#pragma once

#include <Kokkos_Timer.hpp>

#include "platform/device.hpp"

namespace kformer {

// Microseconds per call of f, over at least three calls and `window_ms` after one warm-up call
// (first-touch of buffers, a vendor library's plan).
template <class F>
double mean_us(F&& f, double window_ms = 30) {
  Exec exec;
  f();
  exec.fence();
  Kokkos::Timer timer;
  int calls = 0;
  do {
    f();
    exec.fence();
    ++calls;
  } while (calls < 3 || timer.seconds() * 1e3 < window_ms);
  return timer.seconds() * 1e6 / calls;
}

}  // namespace kformer
