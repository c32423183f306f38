// kernels.attention=auto's start-up trial (miniapp/measure/attention_rates.hpp) on this build's
// execution space: every kind built for the precision is timed on the same inputs, and their
// results lie well within the precision's agreement bound of each other (attention_choice.hpp), so
// the check that keeps a broken kernel out never leaves a sound one out: fp32 and bf16, GQA, one
// sequence of a length that is no multiple of the tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "measure/attention_choice.hpp"
#include "measure/attention_rates.hpp"

using kformer::AttentionTrial;
using kformer::BlockDims;
using kformer::Precision;
using kformer::kernels::AttentionKind;

namespace {

void expect_kinds_agree(Precision precision) {
  BlockDims d;
  d.B = 1, d.T = 75, d.Hl = 4, d.KVl = 2, d.hd = 16;
  const auto kinds = kformer::attention_kinds_built(precision);
  ASSERT_GE(kinds.size(), 2u) << "naive and fused are always built";
  const AttentionTrial trial = kformer::measure_attention_candidates(d, precision, kinds);
  const double bound = kformer::attention_agreement_bound(precision);
  double widest = 0;
  for (const AttentionKind k : kinds) {
    const int i = static_cast<int>(k);
    EXPECT_GT(trial.tflops[i], 0) << kformer::name_of(k);
    EXPECT_TRUE(std::isfinite(trial.diffs[i])) << kformer::name_of(k);
    EXPECT_LT(trial.diffs[i], bound / 4) << kformer::name_of(k) << ": a sound kernel would be left out";
    widest = std::max(widest, trial.diffs[i]);
  }
  // The results were compared: in bf16 the kinds round at different points (naive its probabilities,
  // fused its output only), so they cannot agree bit for bit.
  if (precision == Precision::bf16) EXPECT_GT(widest, 0.0);
  const auto choice = kformer::choose_attention(kformer::AttentionSetting::automatic, trial.tflops, precision, "",
                                                AttentionKind::fused, trial.diffs);
  EXPECT_EQ(choice.reason.find("left out"), std::string::npos) << choice.reason;
}

}  // namespace

TEST(AttentionAgreement, Fp32KindsAgree) { expect_kinds_agree(Precision::fp32); }
TEST(AttentionAgreement, Bf16KindsAgree) { expect_kinds_agree(Precision::bf16); }

// The start-up shape keeps the run's call where the budget allows (a GPU's: GPT-2 124M's micro-batch
// of 8, 12 heads, T 1024), and cuts sequences first, then whole key/value groups, then the length.
TEST(AttentionAgreement, StartupShapeKeepsTheRunsCallWithinTheBudget) {
  BlockDims run;
  run.B = 8, run.T = 1024, run.Hl = 12, run.KVl = 12, run.hd = 64;
  BlockDims d = kformer::startup_attention_shape(run, 2e11);
  EXPECT_EQ(kformer::describe_shape(d), "B=8 T=1024 heads=12/12 hd=64");
  d = kformer::startup_attention_shape(run, 1e10);  // 4.8e9 a sequence: two fit
  EXPECT_EQ(kformer::describe_shape(d), "B=2 T=1024 heads=12/12 hd=64");
  d = kformer::startup_attention_shape(run, 1e9);  // one sequence, then three heads
  EXPECT_EQ(kformer::describe_shape(d), "B=1 T=1024 heads=2/2 hd=64");
  run.B = 2, run.T = 8192, run.Hl = 32, run.KVl = 8, run.hd = 128;  // GQA: groups of 4 query heads
  d = kformer::startup_attention_shape(run, 2e11);
  EXPECT_EQ(kformer::describe_shape(d), "B=1 T=4096 heads=4/1 hd=128");  // 2.06e11 at T 8192
  d = kformer::startup_attention_shape(run, 1e9);
  EXPECT_EQ(kformer::describe_shape(d), "B=1 T=512 heads=4/1 hd=128");
}
