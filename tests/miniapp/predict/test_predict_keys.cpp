// predict.breakdown (predict/key_costs.hpp): what each predict.* key that departs from kformer's own
// run costs the predicted step. Part of test_predict_features.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "predict/kernel_costs.hpp"
#include "predict/key_costs.hpp"
#include "predict/step_sim.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;

namespace {

kformer::RunSettings settings(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), kSource + "/input/tiny.yaml");
  return kformer::read_prediction_deck("predict", overrides, false).settings;
}

}  // namespace

// One entry per key the torchtitan preset (and the command line) moves off kformer's value, no
// other; each entry's step is the one a deck giving that key kformer's value predicts (read as a
// run reads it, not reset in place); kformer's own run has none.
TEST(PredictKeys, EachDepartingKeyIsTheStepWithThatKeyAloneAtKformersValue) {
  const auto a100 = profile("dgx-a100-80gb");
  const std::vector<std::string> deck = {"predict.world=4", "parallel.dp=4", "parallel.zero=3", "train.precision=bf16",
                                         "predict.system=torchtitan", "predict.zero3_gather=overlapped"};
  const std::vector<kp::KeyCost> costs = kp::key_costs(settings(deck), a100);
  std::set<std::string> keys;
  for (const kp::KeyCost& k : costs) {
    keys.insert(k.key);
    std::vector<std::string> without = deck;
    without.push_back(k.key + "=" + k.kformer_value);
    EXPECT_DOUBLE_EQ(k.without_ms, kp::predicted_step_ms(settings(without), a100)) << k.key;
  }
  const std::set<std::string> expected = {"predict.attention", "predict.gather_copy", "predict.scatter_copy", "predict.zero3_gather",
                                          "predict.pointwise", "predict.residual", "predict.loss", "predict.host"};
  EXPECT_EQ(keys, expected);
  const double step = kp::predicted_step_ms(settings(deck), a100);
  // the same step as kformer predict's own path (the plan with its memory estimate)
  kformer::RunPlan full = kformer::make_plan(settings(deck));
  full.attention = kp::costed_attention(full.settings, a100);
  EXPECT_DOUBLE_EQ(step, kp::predict_step(full, a100, false).step_ms);
  for (const kp::KeyCost& k : costs)
    if (k.key == "predict.gather_copy" || k.key == "predict.scatter_copy") EXPECT_GT(step, k.without_ms);  // a copy costs time
    else if (k.key == "predict.zero3_gather") EXPECT_LT(step, k.without_ms);  // prefetching saves it
    else if (k.key == "predict.residual") EXPECT_LT(step, k.without_ms);  // a bf16 stream moves fewer bytes
  EXPECT_TRUE(kp::key_costs(settings({"predict.world=4", "parallel.dp=4"}), a100).empty());
}
