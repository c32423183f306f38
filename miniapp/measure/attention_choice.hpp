// kernels.attention resolved to the kernel the run uses: a named kind as set; `auto` the fastest
// candidate as the start-up timing measured it (attention_rates.hpp: forward and backward of one
// layer's attention in the run's precision), the rates averaged over the ranks first so that
// every rank takes the same. Decided from plain numbers, so that tests can give any.
#pragma once

#include <array>
#include <string>

#include "settings/choices.hpp"

namespace kformer {

// TFLOP/s of forward + backward per kind, indexed by AttentionKind; 0: not a candidate.
using AttentionRates = std::array<double, kernels::kAttentionKinds>;

struct AttentionChoice {
  AttentionSetting setting = AttentionSetting::automatic;  // kernels.attention
  AttentionKind kind = AttentionKind::fused;               // what the run uses
  AttentionRates tflops{};                                 // what auto compared
  Precision precision = Precision::fp32;                   // of those timings
  std::string timed_at;                                    // the timed shape, "T=1024 heads=4/4 hd=64"
  std::string reason;  // "bf16 fwd+bwd TFLOP/s: fused 1.2, naive 0.81 (T=1024 heads=4/4 hd=64)"; "set in the deck"
};

// `setting` as kernels.attention says it; the rates are what auto compares (ignored otherwise).
// auto takes the highest rate; with none measured (no candidate fits) it keeps `fallback`.
AttentionChoice choose_attention(AttentionSetting setting, const AttentionRates& rates, Precision precision,
                                 const std::string& timed_at, AttentionKind fallback);

// What auto became, for the start-up print and the summary: "fused (bf16 fwd+bwd TFLOP/s: ...)";
// empty where the deck named the kind.
std::string describe(const AttentionChoice& c);

}  // namespace kformer
