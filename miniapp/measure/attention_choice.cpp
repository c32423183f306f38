// kernels.attention resolved (see attention_choice.hpp).
#include "measure/attention_choice.hpp"

#include <cstdio>

namespace kformer {

AttentionChoice choose_attention(AttentionSetting setting, const AttentionRates& rates, Precision precision,
                                 const std::string& timed_at, AttentionKind fallback) {
  AttentionChoice c;
  c.setting = setting;
  c.tflops = rates;
  c.precision = precision;
  c.timed_at = timed_at;
  if (setting != AttentionSetting::automatic) {
    c.kind = fixed_attention(setting);
    c.reason = "set in the deck";
    return c;
  }
  int best = -1;  // the first of equal rates: the enum's order breaks ties
  for (int k = 0; k < kernels::kAttentionKinds; ++k)
    if (rates[k] > 0 && (best < 0 || rates[k] > rates[best])) best = k;
  if (best < 0) {
    c.kind = fallback;
    c.reason = "no candidate was timed";
    return c;
  }
  c.kind = static_cast<AttentionKind>(best);
  std::string list;
  for (int k = 0; k < kernels::kAttentionKinds; ++k) {
    if (rates[k] <= 0) continue;
    char item[64];
    std::snprintf(item, sizeof(item), "%s%s %.3g", list.empty() ? "" : ", ", name_of(static_cast<AttentionKind>(k)),
                  rates[k]);
    list += item;
  }
  c.reason = std::string(name_of(precision)) + " fwd+bwd TFLOP/s: " + list + (timed_at.empty() ? "" : " at " + timed_at);
  return c;
}

std::string describe(const AttentionChoice& c) {
  if (c.setting != AttentionSetting::automatic) return "";
  return std::string(name_of(c.kind)) + " (" + c.reason + ")";
}

}  // namespace kformer
