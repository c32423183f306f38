// predict.breakdown (predict/key_costs.hpp): what each predict.* key that departs from kformer's own
// run costs the predicted step. Part of test_predict_features.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "predict/attention_auto.hpp"
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
                                          "predict.pointwise", "predict.residual", "predict.loss", "predict.host",
                                          "predict.embedding_grad"};
  EXPECT_EQ(keys, expected);
  const double step = kp::predicted_step_ms(settings(deck), a100);
  // the same step as kformer predict's own path (the plan with its memory estimate)
  kformer::RunPlan full = kformer::make_plan(settings(deck));
  full.attention = kp::costed_attention(full.settings, a100);
  EXPECT_DOUBLE_EQ(step, kp::predict_step(full, a100, false).step_ms);
  for (const kp::KeyCost& k : costs)
    if (k.key == "predict.gather_copy" || k.key == "predict.scatter_copy" || k.key == "predict.embedding_grad")
      EXPECT_GT(step, k.without_ms);  // a copy, a zeroed table cost time
    else if (k.key == "predict.zero3_gather") EXPECT_LT(step, k.without_ms);  // prefetching saves it
    else if (k.key == "predict.residual") EXPECT_LT(step, k.without_ms);  // a bf16 stream moves fewer bytes
  EXPECT_TRUE(kp::key_costs(settings({"predict.world=4", "parallel.dp=4"}), a100).empty());
}

// predict.breakdown also says what the profile's measured rate of batched-GEMM attention adds over
// the modelled passes (Megatron-LM's attention on an A100): the step against the same step on the
// profile without the figure (tiny widened to 12 heads of 64 at T 1024, where it binds), in the report
// and a summary line; nothing where the run's attention takes no such floor (torchtitan's flash) or
// the profile gives none.
TEST(PredictKeys, TheBreakdownSaysWhatTheAttentionFloorCosts) {
  const auto a100 = profile("dgx-a100-80gb");
  kp::MachineProfile modelled = a100;
  modelled.bf16.batched_gemm_tflops.clear();
  const std::vector<std::string> wide = {"predict.world=2", "parallel.dp=2", "train.precision=bf16", "model.d_model=768",
                                         "model.n_heads=12", "model.max_seq_len=1024", "train.seq_len=1024"};
  std::vector<std::string> megatron = wide;
  megatron.push_back("predict.system=megatron-lm-2022");
  const auto s = settings(megatron);
  const double step = kp::predicted_step_ms(s, a100), without = kp::predicted_step_ms(s, modelled);
  ASSERT_GT(step, without) << "the premise: the floor binds at T 1024, heads of 64";
  nlohmann::json report;
  const std::string text = kp::add_key_costs(report, s, a100, step);
  EXPECT_DOUBLE_EQ(report["predicted"]["batched_gemm_floor_cost_ms"].get<double>(), step - without);
  EXPECT_NE(text.find("what batched-GEMM attention's measured rate costs"), std::string::npos) << text;
  nlohmann::json plain;
  EXPECT_EQ(kp::add_key_costs(plain, s, modelled, without).find("batched-GEMM"), std::string::npos);
  EXPECT_FALSE(plain["predicted"].contains("batched_gemm_floor_cost_ms"));
  std::vector<std::string> titan = wide;
  titan.push_back("predict.system=torchtitan");
  const auto flash = settings(titan);
  nlohmann::json none;
  kp::add_key_costs(none, flash, a100, kp::predicted_step_ms(flash, a100));
  EXPECT_FALSE(none["predicted"].contains("batched_gemm_floor_cost_ms"));
  // kformer's own run under auto, which takes batched_gemm on this profile: the figure holds that kind
  // (without the figure the profile would not rate batched_gemm, and auto would take fused)
  std::vector<std::string> own = wide;
  own.push_back("kernels.attention=auto");
  const auto mine = settings(own);
  ASSERT_EQ(kp::costed_attention(mine, a100), kformer::AttentionKind::batched_gemm);
  std::vector<std::string> held = own;
  held.push_back("kernels.attention=batched_gemm");
  nlohmann::json kformers;
  const double own_step = kp::predicted_step_ms(mine, a100);
  kp::add_key_costs(kformers, mine, a100, own_step);
  EXPECT_DOUBLE_EQ(kformers["predicted"]["batched_gemm_floor_cost_ms"].get<double>(),
                   own_step - kp::predicted_step_ms(settings(held), modelled));
}

// predict.breakdown's compute by kernel family (the report's predicted.kernel_ms_by_family): rank
// 0's kernels, each at the profile's cost, by what they are. On one rank nothing but kernels makes
// the step, so the families add up to it; a preset's own passes are named for what they are.
TEST(PredictKeys, TheComputeByFamilyAddsUpToAOneRankStep) {
  const auto a100 = profile("dgx-a100-80gb");
  const kformer::RunSettings one = settings({"train.precision=bf16"});
  const kp::StepPrediction p = kp::predict_step(kp::costed_layout(one, a100), a100, false);
  double sum = 0;
  for (const auto& [family, ms] : p.rank0_kernel_ms) sum += ms;
  EXPECT_NEAR(sum, p.step_ms, 1e-9 * p.step_ms);
  for (const char* f : {"gemm", "attention", "norm", "residual", "embedding", "cross_entropy", "optimizer"})
    EXPECT_GT(p.rank0_kernel_ms.count(f) ? p.rank0_kernel_ms.at(f) : 0.0, 0.0) << f;
  // kformer's CUDA build runs GPT's GELU in cuBLASLt's epilogues, both ways (predict/own_build.hpp)
  EXPECT_EQ(p.rank0_kernel_ms.count("activation"), 0u);
  // Megatron-Core at DP 2: its pass over each bucket, and what the buckets' SMs cost the backward
  const kformer::RunSettings mcore =
      settings({"train.precision=bf16", "predict.world=2", "parallel.dp=2", "predict.system=megatron-core"});
  const kp::StepPrediction m = kp::predict_step(kp::costed_layout(mcore, a100), a100, false);
  EXPECT_GT(m.rank0_kernel_ms.at("bucket_pass"), 0.0);
  EXPECT_GT(m.rank0_kernel_ms.at("embedding_dense_grad"), 0.0);
  double busy = 0;
  for (const auto& [family, ms] : m.rank0_kernel_ms) busy += ms;
  EXPECT_LE(busy, m.step_ms);
}
