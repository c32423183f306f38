// kernels.attention resolved to the kernel the run uses: a named kind as set; `auto` the fastest
// candidate as the start-up timing measured it (attention_rates.hpp: forward and backward of one
// layer's attention in the run's precision), the rates averaged over the ranks first so that
// every rank takes the same, among the candidates whose results agree with another's there (a
// kernel miscompiled for this device, or a faulty device, is never chosen for being fast).
// Decided from plain numbers, so that tests can give any.
#pragma once

#include <array>
#include <string>

#include "settings/choices.hpp"

namespace kformer {

// TFLOP/s of forward + backward per kind, indexed by AttentionKind; 0: not a candidate.
using AttentionRates = std::array<double, kernels::kAttentionKinds>;
// Per kind timed, how far its results at the timed shape lie from the nearest other candidate's
// (attention_rates.hpp: the output and the input gradients each as ||a - b|| / max(||a||, ||b||),
// the larger of the two); 0 for a lone candidate or one not timed, +inf where not finite.
using AttentionDiffs = std::array<double, kernels::kAttentionKinds>;

// The most two kinds' results may differ and still be the same attention: in fp32 they agree to a
// few 1e-7 of their size (no TF32 anywhere: 3xTF32 on the tensor cores, CUBLAS_COMPUTE_32F); in
// bf16 each rounds its scores, probabilities and gradients to 8 bits, a few 1e-3; a dropped causal
// mask or a wrong scale moves them 0.3 to 1 (test_attention_tiles' and test_attention_vendor's
// planted faults).
double attention_agreement_bound(Precision precision);

struct AttentionChoice {
  AttentionSetting setting = AttentionSetting::automatic;  // kernels.attention
  AttentionKind kind = AttentionKind::fused;               // what the run uses
  AttentionRates tflops{};                                 // what auto compared
  AttentionDiffs diffs{};                                  // and how far each lay from the others
  Precision precision = Precision::fp32;                   // of those timings
  std::string timed_at;                                    // the timed shape, "T=1024 heads=4/4 hd=64"
  std::string reason;  // "bf16 fwd+bwd TFLOP/s: fused 1.2, naive 0.81 (T=1024 heads=4/4 hd=64)"; "set in the deck"
};

// `setting` as kernels.attention says it; the rates and differences are what auto compares
// (ignored otherwise). auto takes the highest rate among the kinds within attention_agreement_bound
// of another, and names those it left out; with none measured (no candidate fits) it keeps
// `fallback`. Throws ConfigError where kinds were timed and none agrees with another (no kind to
// trust: the line names them and says to set kernels.attention to one whose tests pass here).
AttentionChoice choose_attention(AttentionSetting setting, const AttentionRates& rates, Precision precision,
                                 const std::string& timed_at, AttentionKind fallback, const AttentionDiffs& diffs = {});

// What auto became, for the start-up print and the summary: "fused (bf16 fwd+bwd TFLOP/s: ...)";
// empty where the deck named the kind.
std::string describe(const AttentionChoice& c);

}  // namespace kformer
