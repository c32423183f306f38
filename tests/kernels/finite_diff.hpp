// Gradient checks for the float64 host references of the kernel tests: central differences of
// L(x) = <f(x), w>, and a bitwise comparison of two runs of a backward.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace ktest {

using Fn = std::function<std::vector<double>(const std::vector<double>&)>;

// dL/dx for every element of x, L(x) = <f(x), w>, by central differences with step h.
inline std::vector<double> numeric_grad(const Fn& f, std::vector<double> x, const std::vector<double>& w,
                                        double h = 1e-6) {
  auto loss = [&](const std::vector<double>& v) {
    const std::vector<double> y = f(v);
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
    return s;
  };
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss(x);
    x[i] = x0 - h;
    const double lm = loss(x);
    x[i] = x0;
    g[i] = (lp - lm) / (2 * h);
  }
  return g;
}

// Same values bit for bit (host copies of float views: the double conversion is exact).
inline void expect_bitwise_equal(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ += !(a[i] == b[i]);
  EXPECT_EQ(differ, 0u) << what << ": elements that differ between two identical runs";
}

}  // namespace ktest
