// calibrate's kernel rounds (calibrate_rounds.hpp): a busy moment that inflated a run of GEMM
// shapes in one round leaves the median, and the step predicted on it, where the clean rounds put
// them, and the spread names the figure it moved.
#include <gtest/gtest.h>

#include <stdexcept>

#include "predict/calibrate_kernels.hpp"
#include "predict/calibrate_rounds.hpp"
#include "predict/machine_profile.hpp"
#include "predict/step_sim.hpp"
#include "settings/prediction_deck.hpp"
#include "train/make_plan.hpp"

namespace kp = kformer::predict;

namespace {

const std::string kSource = KFORMER_SOURCE_DIR;

// A round of kformer's H100 calibration scaled by `f`, and with `busy` its bf16 kernels (measured in
// a row) by `f * inflate` too: what one sweep inside a busy moment gives.
kp::MachineProfile sweep(double f, bool busy = false, double inflate = 1) {
  kp::MachineProfile p = kp::load_profile(kSource + "/input/machines/h100-measured.yaml");
  for (auto* r : {&p.fp32, &p.bf16}) {
    const double g = f * (r == &p.bf16 && busy ? inflate : 1);
    for (auto& q : r->gemm_points) q.forward_us *= g, q.backward_us *= g;
    for (auto& a : r->attention_points) a.forward_us *= g, a.backward_us *= g;
  }
  for (auto& [family, gbps] : p.memory_gbps) gbps /= f;
  return p;
}

double step_ms(const kp::MachineProfile& p) {
  const std::vector<std::string> o = {kSource + "/input/gpt3-small.yaml", "train.precision=bf16", "kernels.attention=fused"};
  return kp::predict_step(kformer::make_plan(kformer::read_prediction_deck("predict", o, false).settings), p, false).step_ms;
}

}  // namespace

TEST(CalibrateRounds, ABusyMomentInOneRoundLeavesTheMedianWhereTheOthersPutIt) {
  const kp::MachineProfile clean = sweep(1.0);
  kp::RoundsSpread spread;
  kp::MachineProfile m = kp::median_of_rounds({sweep(0.99), sweep(1.01, true, 1.3), sweep(1.0)}, &spread);
  kp::fit_kernel_curves(m);
  for (std::size_t i = 0; i < clean.bf16.gemm_points.size(); ++i)
    EXPECT_NEAR(m.bf16.gemm_points[i].forward_us / clean.bf16.gemm_points[i].forward_us, 1.0, 0.011) << i;
  // predict on the busy round alone comes out slow; on the median, within the clean rounds' 1%
  kp::MachineProfile busy = sweep(1.01, true, 1.3);
  kp::fit_kernel_curves(busy);
  EXPECT_GT(step_ms(busy) / step_ms(clean), 1.2);
  EXPECT_NEAR(step_ms(m) / step_ms(clean), 1.0, 0.011);
  // the widest spread is one of the inflated figures
  EXPECT_EQ(spread.rounds, 3);
  EXPECT_NEAR(spread.relative, 1.01 * 1.3 - 0.99, 1e-9);
  EXPECT_EQ(spread.figure.rfind("bf16 ", 0), 0u) << spread.figure;
  EXPECT_NE(spread.describe().find("the median of 3 round(s) (widest spread 32% in bf16 "), std::string::npos)
      << spread.describe();
}

TEST(CalibrateRounds, AnEvenCountTakesTheMiddleTwoAndOneRoundIsItself) {
  kp::MachineProfile m = kp::median_of_rounds({sweep(1.0), sweep(1.2), sweep(1.1), sweep(5.0)}, nullptr);
  const kp::MachineProfile ref = sweep(1.0);
  EXPECT_NEAR(m.fp32.gemm_points[0].forward_us, 1.15 * ref.fp32.gemm_points[0].forward_us, 1e-9);
  EXPECT_NEAR(m.memory_gbps.at("residual"), ref.memory_gbps.at("residual") * (1 / 1.1 + 1 / 1.2) / 2, 1e-9);
  kp::RoundsSpread spread;
  const kp::MachineProfile one = kp::median_of_rounds({sweep(1.3)}, &spread);
  EXPECT_DOUBLE_EQ(one.bf16.gemm_points[2].backward_us, sweep(1.3).bf16.gemm_points[2].backward_us);
  EXPECT_EQ(spread.relative, 0);
}

TEST(CalibrateRounds, RoundsOfOtherShapesAreAnError) {
  kp::MachineProfile other = sweep(1.0);
  other.bf16.gemm_points[1].n += 1;
  EXPECT_THROW(kp::median_of_rounds({sweep(1.0), other}, nullptr), std::logic_error);
  other = sweep(1.0);
  other.fp32.attention_points.pop_back();
  EXPECT_THROW(kp::median_of_rounds({sweep(1.0), other}, nullptr), std::logic_error);
  EXPECT_THROW(kp::median_of_rounds({}, nullptr), std::logic_error);
}
