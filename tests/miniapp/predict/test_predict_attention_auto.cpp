// kernels.attention=auto as predict costs it (predict/attention_auto.hpp): the kind kformer's start-up
// would take on the profile's machine, among the kinds the profile rates, the fastest at the run's
// shape whose memory fits. Part of test_predict_features.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernel_choice.hpp"
#include "predict/attention_auto.hpp"
#include "predict/kernel_costs.hpp"
#include "predict/key_costs.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;
using kformer::AttentionKind;

namespace {

kformer::RunSettings small(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), kSource + "/input/gpt3-small.yaml");
  return kformer::read_prediction_deck("predict", overrides, false).settings;
}

// Forward and backward of the deck's attention (12 heads of 64) as `kind` on `p`.
double attention_pair_us(const kformer::RunSettings& s, const kp::MachineProfile& p, AttentionKind kind) {
  const auto us = [&](bool backward) {
    return kp::attention_us(p, s.bf16(), kformer::name_of(kind), s.train.micro_batch, s.train.seq_len, 12, 12, 64,
                            backward);
  };
  return us(false) + us(true);
}

}  // namespace

// A datasheet GPU profile rates cuDNN's kernel (cudnn_*_tflops) and batched GEMMs (batched_gemm_tflops)
// beside kformer's CUDA-core kernels: auto is the fastest of the kinds it rates, never fused's 15
// TFLOP/s where cuDNN's kernel runs at hundreds; vendor in bf16 only; a kind the profile does not rate
// is not a candidate.
TEST(PredictAttentionAuto, TheFastestKindTheProfileRatesInTheRunsPrecision) {
  const auto h100 = profile("h100-sxm-80gb"), a100 = profile("dgx-a100-80gb");
  const auto bf16 = small({"train.precision=bf16"});
  const std::vector<AttentionKind> on_h100 = kp::attention_candidates(bf16, h100);
  ASSERT_EQ(on_h100.size(), 4u);  // naive and fused (its CUDA-core kernels), batched_gemm, vendor
  EXPECT_EQ(on_h100.front(), AttentionKind::vendor);
  for (std::size_t i = 1; i < on_h100.size(); ++i)  // fastest first
    EXPECT_LE(attention_pair_us(bf16, h100, on_h100[i - 1]), attention_pair_us(bf16, h100, on_h100[i]));
  EXPECT_LT(attention_pair_us(bf16, h100, AttentionKind::vendor),
            attention_pair_us(bf16, h100, AttentionKind::fused) / 10);
  // the A100 profiles give no cuDNN rate: batched GEMMs, which they rate, beat the CUDA cores
  EXPECT_EQ(kp::costed_attention(bf16, a100), AttentionKind::batched_gemm);
  // fp32: no vendor kernel, and no profile rates batched GEMMs in fp32: kformer's fused
  EXPECT_EQ(kp::costed_attention(small({}), h100), AttentionKind::fused);
  EXPECT_EQ(kp::costed_attention(bf16, profile("grand-teton-h100-96gb")), AttentionKind::fused);
  EXPECT_EQ(kp::costed_attention(bf16, profile("h200-sxm-141gb")), AttentionKind::vendor);
  // a deck that names its kernel gets it
  EXPECT_EQ(kp::costed_attention(small({"train.precision=bf16", "kernels.attention=fused"}), h100), AttentionKind::fused);
  // the step predict makes is the step of the deck naming the chosen kind
  EXPECT_DOUBLE_EQ(kp::predicted_step_ms(bf16, h100),
                   kp::predicted_step_ms(small({"train.precision=bf16", "kernels.attention=vendor"}), h100));
  EXPECT_LT(kp::predicted_step_ms(bf16, h100),
            kp::predicted_step_ms(small({"train.precision=bf16", "kernels.attention=fused"}), h100));
}

// A calibrated profile rates every kind calibrate timed (its attention points): on the H200 of
// session 50 (kformer calibrate at the 124M step's shapes, kept in docs/gpu-runs/), predict's auto is
// what that GPU's own start-up chose in the same run's 124M step (perf/step_*.json): cuDNN's kernel in
// bf16, the batched GEMMs in fp32. Before, only the kinds with a rate (naive, fused) were candidates,
// and predict costed the CUDA-core fused kernel: 182 ms against the 33.6 ms the step took.
TEST(PredictAttentionAuto, ACalibratedProfileRatesTheKindsItTimed) {
  const kp::MachineProfile h200 =
      kp::load_profile(kSource + "/docs/gpu-runs/2026-12-04-h200-2/calibrate/own.yaml");
  const std::vector<std::string> step = {"model.vocab_size=50304", "model.max_seq_len=1024", "train.seq_len=1024",
                                         "train.global_batch=8", "train.micro_batch=8"};
  auto with = [&](const std::string& precision) {
    std::vector<std::string> o = step;
    o.push_back("train.precision=" + precision);
    return small(o);
  };
  EXPECT_EQ(kp::costed_attention(with("bf16"), h200), AttentionKind::vendor);
  EXPECT_EQ(kp::costed_attention(with("fp32"), h200), AttentionKind::batched_gemm);
  const std::vector<AttentionKind> bf16 = kp::attention_candidates(with("bf16"), h200);
  EXPECT_EQ(bf16.size(), 4u);  // naive, fused, batched_gemm and vendor, all timed there
  EXPECT_EQ(kp::attention_candidates(with("fp32"), h200).size(), 3u);  // no vendor kernel in fp32
}

// Start-up leaves out a kind whose memory estimate does not fit (app.cpp, resolve_attention); so does
// predict: batched_gemm keeps the T*T probabilities, and with a device between its estimate and
// fused's, auto is fused; where none fits, fused, start-up's fallback.
TEST(PredictAttentionAuto, PassesOverAKindWhoseProbabilitiesDoNotFit) {
  const auto a100 = profile("dgx-a100-80gb");
  const auto deck = [](const std::string& limit) {
    return small({"train.precision=bf16", "memory.limit_gb=" + limit});
  };
  const kformer::RunPlan layout = kformer::plan_without_memory(deck("80"));
  const double fused = kformer::with_attention(layout, AttentionKind::fused).memory.total();
  const double batched = kformer::with_attention(layout, AttentionKind::batched_gemm).memory.total();
  ASSERT_GT(batched, fused * 1.5);  // 4 x 12 x 2048^2 probabilities a layer
  const double baseline = a100.process_baseline_gb * 1e9;
  const auto chosen = [&](double bytes) {
    return kp::costed_layout(deck(std::to_string((bytes + baseline) / 1e9)), a100).attention;
  };
  EXPECT_EQ(chosen(batched * 1.01), AttentionKind::batched_gemm);
  EXPECT_EQ(chosen((fused + batched) / 2), AttentionKind::fused);
  EXPECT_EQ(chosen(fused / 2), AttentionKind::fused);  // none fits: start-up's fallback (the report says NO)
  // a deck that names its kernel keeps it, fitting or not (the report says whether it fits)
  auto named = deck(std::to_string((fused + baseline) / 1e9));
  named.kernels.attention = kformer::AttentionSetting::batched_gemm;
  EXPECT_EQ(kp::costed_layout(named, a100).attention, AttentionKind::batched_gemm);
}

// Under another system's attention (predict.attention) kformer's kernel is not costed: auto sizes the
// memory as fused (a flash kernel's row statistics), and what the system's attention costs against
// kformer's own run there is the breakdown's predict.attention line: nothing on an H100, where both
// are cuDNN's kernel at the profile's rates.
TEST(PredictAttentionAuto, AnotherSystemsAttentionLeavesKformersKindToTheMemory) {
  const auto h100 = profile("h100-sxm-80gb");
  const auto mcore = small({"train.precision=bf16", "predict.system=megatron-core"});
  EXPECT_EQ(kp::costed_layout(mcore, h100).attention, AttentionKind::fused);
  EXPECT_EQ(kp::costed_layout(small({"train.precision=bf16", "predict.system=megatron-core", "kernels.attention=naive"}),
                              h100)
                .attention,
            AttentionKind::naive);
  bool seen = false;
  for (const kp::KeyCost& k : kp::key_costs(mcore, h100))
    if (k.key == "predict.attention") {
      seen = true;
      EXPECT_DOUBLE_EQ(k.without_ms, kp::predicted_step_ms(mcore, h100)) << "cudnn against kformer's vendor";
    }
  EXPECT_TRUE(seen);
}
