// predict.residual: the norms and residual adds of a bf16 run costed as software that keeps its
// residual stream in bf16 moves it (with Megatron-LM's hidden dropout masks), where kformer's own
// stream is fp32. Checked on a described middle chunk, against the bytes written out here. Part of
// test_predict_features.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "predict/kernel_costs.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;

namespace {

// The costs of the items named `name` in a list.
std::vector<double> costs_of(const std::vector<kp::WorkItem>& items, const std::string& name) {
  std::vector<double> out;
  for (const auto& i : items)
    if (i.kind == kp::ItemKind::compute && i.name == name) out.push_back(i.us);
  return out;
}

// Chunk 1 of tiny.yaml (micro-batch 2, T 32, C 64) on 4 stages at TP 2, without recomputation.
kp::ChunkWork chunk(const std::string& precision, const std::string& residual) {
  return kp::chunk_work(profile("perlmutter-a100-40gb"),
                        plan("tiny.yaml", {"predict.world=8", "parallel.pp=4", "parallel.tp=2", "train.recompute=none",
                                           "train.precision=" + precision, "predict.residual=" + residual}),
                        1);
}

}  // namespace

// In bf16 a norm moves 4 bytes an element forward and 6 backward (with its fp32 statistics and
// parameters), a residual add 6, a backward's gradient sum 6; with dropout the add also writes its
// 1-byte mask and the sum is joined by the dropout's backward (5 more). Every such item of the
// chunk costs that at the profile's bf16 rate of its family; kformer's own fp32 stream (`fp32`)
// costs more, and an fp32 run is the same under every value.
TEST(PredictResidual, TheStreamsNormsAndAddsCostItsBf16Bytes) {
  const kp::MachineProfile p = profile("perlmutter-a100-40gb");
  const double rows = 2 * 32, C = 64, e = rows * C, s = p.compute_scale;
  const double norm_f = kp::memory_us(p, "norm", 4 * e + 8 * rows + 8 * C, true) * s;
  const double norm_b = kp::memory_us(p, "norm", 6 * e + 8 * rows + 16 * C, true) * s;
  for (const std::string mode : {"activations", "activations_dropout"}) {
    const double mask = mode == "activations_dropout" ? 1 : 0;
    const kp::ChunkWork w = chunk("bf16", mode);
    const auto nf = costs_of(w.forward, "layernorm_forward"), nb = costs_of(w.backward, "layernorm_backward");
    const auto af = costs_of(w.forward, "residual_forward"), ab = costs_of(w.backward, "residual_forward");
    ASSERT_EQ(nf.size(), 2u) << mode;  // one block: its two norms and two adds each way
    ASSERT_EQ(ab.size(), 2u) << mode;
    for (double us : nf) EXPECT_DOUBLE_EQ(us, norm_f) << mode;
    for (double us : nb) EXPECT_DOUBLE_EQ(us, norm_b) << mode;
    for (double us : af) EXPECT_DOUBLE_EQ(us, kp::memory_us(p, "residual", (6 + mask) * e, true) * s) << mode;
    for (double us : ab) EXPECT_DOUBLE_EQ(us, kp::memory_us(p, "residual", (6 + 5 * mask) * e, true) * s) << mode;
    const kp::ChunkWork own = chunk("bf16", "fp32");
    EXPECT_GT(costs_of(own.forward, "residual_forward").at(0), af.at(0)) << mode;
    EXPECT_GT(costs_of(own.forward, "layernorm_forward").at(0), nf.at(0)) << mode;
    EXPECT_DOUBLE_EQ(kp::compute_us(chunk("fp32", mode).forward), kp::compute_us(chunk("fp32", "fp32").forward)) << mode;
  }
}

// Under a 16-bit stream the software's GEMMs read and write bf16: none of kformer's conversions
// between its fp32 stream and the GEMMs' bf16 inputs (GEMM outputs rounded for storage, gradients
// rounded before their GEMMs, pipeline messages narrowed and widened) is charged; kformer's own
// stream has them. The parameters' conversions stay: a ZeRO-3 gather still widens its unit.
TEST(PredictResidual, ABf16StreamHasNoConversionsAroundItsGemms) {
  const auto converts = [](const kp::ChunkWork& w) {
    std::size_t n = 0;
    for (const auto* list : {&w.forward, &w.head_backward, &w.backward, &w.backward_last})
      for (const auto& i : *list) n += i.kind == kp::ItemKind::compute && i.family == "convert";
    return n;
  };
  const kp::ChunkWork own = chunk("bf16", "fp32");
  EXPECT_GE(converts(own), 4u);  // the messages in and out, the stored QKV, the gradients into the backward GEMMs
  for (const std::string mode : {"activations", "activations_dropout"}) {
    const kp::ChunkWork w = chunk("bf16", mode);
    EXPECT_EQ(converts(w), 0u) << mode;
    // and only they leave: every other item of each list stays
    for (const auto& [mine, kformers] : {std::make_pair(&w.forward, &own.forward), std::make_pair(&w.backward, &own.backward)}) {
      std::size_t others = 0;
      for (const auto& i : *kformers) others += i.family != "convert";
      EXPECT_EQ(mine->size(), others) << mode;
    }
  }
  // ZeRO-3 over 2 ranks in bf16: each unit's gather widens it on the compute stream (the require's time)
  const kp::MachineProfile p = profile("perlmutter-a100-40gb");
  const auto miss = [&](const std::string& residual) {
    const kp::ChunkWork w = kp::chunk_work(p, plan("tiny.yaml", {"predict.world=2", "parallel.dp=2", "parallel.zero=3",
                                                                  "train.precision=bf16", "predict.residual=" + residual}),
                                           0);
    double us = 0;
    for (const auto& i : w.forward) us += i.kind == kp::ItemKind::require ? i.us : 0;
    return us;
  };
  EXPECT_GT(miss("activations"), 0);
  EXPECT_DOUBLE_EQ(miss("activations"), miss("fp32"));
}
