// kernels.attention resolved (miniapp/measure/attention_choice.hpp) from given rates, so that the
// verdict does not depend on which kernel is faster on the machine running the test: auto takes
// the fastest kind it timed, names every rate it compared and the shape; a named kind is honoured
// whatever the rates; with nothing timed auto keeps the plan's kind.
#include <gtest/gtest.h>

#include "measure/attention_choice.hpp"

using kformer::AttentionRates;
using kformer::AttentionSetting;
using kformer::choose_attention;
using kformer::Precision;
using kformer::kernels::AttentionKind;

namespace {
AttentionRates rates(double naive, double fused, double batched, double vendor) {
  return {naive, fused, batched, vendor};
}
}  // namespace

TEST(AttentionChoice, AutoTakesTheFastestAndSaysWhy) {
  auto c = choose_attention(AttentionSetting::automatic, rates(0.8, 1.2, 0.5, 0), Precision::fp32, "T=64 heads=4/4 hd=16",
                            AttentionKind::fused);
  EXPECT_EQ(c.kind, AttentionKind::fused);
  EXPECT_EQ(kformer::describe(c),
            "fused (fp32 fwd+bwd TFLOP/s: naive 0.8, fused 1.2, batched_gemm 0.5 at T=64 heads=4/4 hd=16)");
  c = choose_attention(AttentionSetting::automatic, rates(0.8, 1.2, 0.5, 90), Precision::bf16, "", AttentionKind::fused);
  EXPECT_EQ(c.kind, AttentionKind::vendor);
  c = choose_attention(AttentionSetting::automatic, rates(2.0, 1.2, 0, 0), Precision::fp32, "", AttentionKind::fused);
  EXPECT_EQ(c.kind, AttentionKind::naive);
  EXPECT_EQ(c.tflops[0], 2.0);
}

TEST(AttentionChoice, AutoWithNothingTimedKeepsThePlansKind) {
  const auto c = choose_attention(AttentionSetting::automatic, rates(0, 0, 0, 0), Precision::fp32, "", AttentionKind::fused);
  EXPECT_EQ(c.kind, AttentionKind::fused);
  EXPECT_EQ(c.reason, "no candidate was timed");
}

TEST(AttentionChoice, ASettingIsHonouredWhateverTheRates) {
  auto c = choose_attention(AttentionSetting::naive, rates(0.1, 9, 9, 9), Precision::fp32, "", AttentionKind::naive);
  EXPECT_EQ(c.kind, AttentionKind::naive);
  EXPECT_EQ(kformer::describe(c), "");  // nothing to resolve: the print shows the value alone
  c = choose_attention(AttentionSetting::vendor, rates(9, 9, 9, 0.1), Precision::bf16, "", AttentionKind::vendor);
  EXPECT_EQ(c.kind, AttentionKind::vendor);
  EXPECT_EQ(c.reason, "set in the deck");
}
