// Repeats until they agree (see stable_figure.hpp).
#include "measure/stable_figure.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace kformer {

std::string StableFigure::describe(int precision) const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%.*g (spread %.*g over the last %d of %d repeats%s)", precision, value, 2, spread,
                std::min(repeats, window), repeats, agreed ? "" : ", which disagree");
  return buf;
}

StableFigure repeat_until_stable(const std::function<double()>& measure, const Agreement& bound) {
  std::vector<double> all;
  StableFigure f;
  const int window = std::max(1, bound.window);
  f.window = window;
  while (int(all.size()) < std::max(window, bound.max_repeats)) {
    all.push_back(measure());
    if (int(all.size()) < window) continue;
    std::vector<double> last(all.end() - window, all.end());
    std::sort(last.begin(), last.end());
    f.value = last[last.size() / 2];
    f.spread = last.back() - last.front();
    f.repeats = int(all.size());
    f.agreed = f.spread <= std::max(bound.relative * std::fabs(f.value), bound.absolute);
    if (f.agreed) break;
  }
  return f;
}

}  // namespace kformer
