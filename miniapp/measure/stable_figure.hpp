// A measurement repeated until its repeats agree: calibrate's figures that a busy moment can move
// by an order (a rank's wake-up, the whole model's scale over its kernels) are taken again until
// the last few agree within a stated bound, or the repeats run out; the figure is their median
// and its spread is reported, so one slow moment neither becomes the profile nor passes unseen.
#pragma once

#include <functional>
#include <string>

namespace kformer {

struct StableFigure {
  double value = 0;   // the median of the last `window` repeats
  double spread = 0;  // their max - min
  int repeats = 0;    // how many were taken
  int window = 3;     // how many in a row had to agree
  bool agreed = false;
  // "1.12 (spread 0.03 over the last 3 of 4 repeats)"
  std::string describe(int precision = 3) const;
};

struct Agreement {
  double relative = 0.1;  // the spread may be this fraction of the median ...
  double absolute = 0;    // ... or this much, whichever is larger
  int window = 3;         // over this many repeats in a row
  int max_repeats = 8;
};

// Calls measure() until the last `window` values agree (max - min <= max(relative * median,
// absolute)) or max_repeats calls were made. measure() must return the same value on every rank
// that calls it (a reduced figure), so that every rank repeats alike.
StableFigure repeat_until_stable(const std::function<double()>& measure, const Agreement& bound);

}  // namespace kformer
