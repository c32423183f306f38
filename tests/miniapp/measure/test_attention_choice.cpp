// kernels.attention resolved (miniapp/measure/attention_choice.hpp) from given rates, so that the
// verdict does not depend on which kernel is faster on the machine running the test: auto takes
// the fastest kind it timed, names every rate it compared and the shape; a named kind is honoured
// whatever the rates; with nothing timed auto keeps the plan's kind; a kind whose results lie apart
// from the others' (beyond the precision's bound, or not finite) is left out and named, and with no
// two kinds agreeing auto stops in one line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "measure/attention_choice.hpp"
#include "platform/errors.hpp"

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

namespace {
kformer::AttentionDiffs diffs(double naive, double fused, double batched, double vendor) {
  return {naive, fused, batched, vendor};
}
}  // namespace

// A kind whose results lie apart from every other's is not chosen however fast, and the reason names it.
TEST(AttentionChoice, AutoLeavesOutAKindApartFromTheOthers) {
  auto c = choose_attention(AttentionSetting::automatic, rates(0.8, 1.2, 0.5, 0), Precision::fp32, "T=64 heads=4/4 hd=16",
                            AttentionKind::fused, diffs(2e-7, 0.58, 2e-7, 0));
  EXPECT_EQ(c.kind, AttentionKind::naive);
  EXPECT_EQ(kformer::describe(c),
            "naive (fp32 fwd+bwd TFLOP/s: naive 0.8, batched_gemm 0.5 at T=64 heads=4/4 hd=16; left out, their results "
            "apart from the others' (relative difference): fused 0.58)");
  EXPECT_EQ(c.diffs[1], 0.58);
  // Not finite is apart too.
  c = choose_attention(AttentionSetting::automatic, rates(0.8, 1.2, 0.5, 0), Precision::fp32, "", AttentionKind::fused,
                       diffs(2e-7, std::nan(""), 2e-7, 0));
  EXPECT_EQ(c.kind, AttentionKind::naive);
  c = choose_attention(AttentionSetting::automatic, rates(0.8, 1.2, 0.5, 0), Precision::fp32, "", AttentionKind::fused,
                       diffs(2e-7, INFINITY, 2e-7, 0));
  EXPECT_EQ(c.kind, AttentionKind::naive);
}

// bf16's rounding is within its bound; the same difference in fp32 is not.
TEST(AttentionChoice, TheBoundIsThePrecisions) {
  const auto d = diffs(0.012, 0.012, 0.009, 0.009);
  auto c = choose_attention(AttentionSetting::automatic, rates(0.8, 1.2, 0.5, 90), Precision::bf16, "", AttentionKind::fused, d);
  EXPECT_EQ(c.kind, AttentionKind::vendor);
  EXPECT_EQ(c.reason.find("left out"), std::string::npos);
  // In fp32 a 1% difference is a broken kernel: with every kind that far apart, nothing is trusted.
  try {
    choose_attention(AttentionSetting::automatic, rates(0.8, 1.2, 0.5, 0), Precision::fp32, "T=64 heads=4/4 hd=16",
                     AttentionKind::fused, d);
    FAIL() << "no kind agrees with another: auto must stop";
  } catch (const kformer::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "kernels.attention=auto: no attention kind agrees with another on this device (naive 0.012, fused "
              "0.012, batched_gemm 0.009: each the relative difference of its results from the nearest other's at "
              "T=64 heads=4/4 hd=16, above 0.001): a kernel is miscompiled for it or the device is faulty; set "
              "kernels.attention to a kind whose tests pass here (ctest -R attention)");
    EXPECT_EQ(e.exit_code(), 2);
  }
  EXPECT_GT(kformer::attention_agreement_bound(Precision::bf16), kformer::attention_agreement_bound(Precision::fp32));
}
