// A measurement repeated until its repeats agree (measure/stable_figure.hpp): a steady figure stops
// after the window, an outlier first is outlived, a figure that never settles is reported as not
// agreed after the stated number of repeats, and the median of the last window is the value.
#include <gtest/gtest.h>

#include <vector>

#include "measure/stable_figure.hpp"

using namespace kformer;

namespace {

StableFigure run(const std::vector<double>& values, const Agreement& bound) {
  std::size_t i = 0;
  return repeat_until_stable([&] { return values.at(i++); }, bound);
}

}  // namespace

TEST(StableFigure, ASteadyFigureStopsAfterItsWindow) {
  const StableFigure f = run({1.10, 1.12, 1.11, 9.0}, {0.1, 0, 3, 8});
  EXPECT_TRUE(f.agreed);
  EXPECT_EQ(f.repeats, 3);
  EXPECT_DOUBLE_EQ(f.value, 1.11);
  EXPECT_NEAR(f.spread, 0.02, 1e-12);
}

TEST(StableFigure, AnOutlierIsOutlivedNotAveraged) {
  // The wake-up of the issue: one repeat at 1280 us among 5-60 us ones.
  const StableFigure f = run({1280, 30, 25, 40, 35}, {0.5, 50, 3, 8});
  EXPECT_TRUE(f.agreed);
  EXPECT_EQ(f.repeats, 4);
  EXPECT_DOUBLE_EQ(f.value, 30);
}

TEST(StableFigure, AFigureThatNeverSettlesIsNotAgreed) {
  const StableFigure f = run({1.0, 1.3, 1.0, 1.3, 1.0, 1.3}, {0.1, 0, 3, 6});
  EXPECT_FALSE(f.agreed);
  EXPECT_EQ(f.repeats, 6);
  EXPECT_NE(f.describe().find("disagree"), std::string::npos) << f.describe();
}

TEST(StableFigure, TheAbsoluteFloorLetsSmallFiguresAgree) {
  // 5, 20 and 12 us differ by 3x but by less than 50 us: a wake-up that small is not noise to refuse.
  EXPECT_TRUE(run({5, 20, 12}, {0.5, 50, 3, 8}).agreed);
  EXPECT_FALSE(run({5, 20, 12}, {0.5, 0, 3, 3}).agreed);
}
