// kernels.attention resolved (see attention_choice.hpp).
#include "measure/attention_choice.hpp"

#include <cstdio>

#include "platform/errors.hpp"

namespace kformer {

double attention_agreement_bound(Precision precision) { return precision == Precision::bf16 ? 5e-2 : 1e-3; }

namespace {

// "naive 0.8, fused 1.2" over the kinds for which want(k) holds, each with value(k).
template <class Want, class Value>
std::string list_kinds(const Want& want, const Value& value) {
  std::string list;
  for (int k = 0; k < kernels::kAttentionKinds; ++k) {
    if (!want(k)) continue;
    char item[64];
    std::snprintf(item, sizeof(item), "%s%s %.3g", list.empty() ? "" : ", ", name_of(static_cast<AttentionKind>(k)),
                  value(k));
    list += item;
  }
  return list;
}

}  // namespace

AttentionChoice choose_attention(AttentionSetting setting, const AttentionRates& rates, Precision precision,
                                 const std::string& timed_at, AttentionKind fallback, const AttentionDiffs& diffs) {
  AttentionChoice c;
  c.setting = setting;
  c.tflops = rates;
  c.diffs = diffs;
  c.precision = precision;
  c.timed_at = timed_at;
  if (setting != AttentionSetting::automatic) {
    c.kind = fixed_attention(setting);
    c.reason = "set in the deck";
    return c;
  }
  const double bound = attention_agreement_bound(precision);
  const auto timed = [&](int k) { return rates[k] > 0; };
  const auto agrees = [&](int k) { return timed(k) && diffs[k] <= bound; };  // false for NaN too
  const auto differs = [&](int k) { return timed(k) && !agrees(k); };
  int best = -1;  // the first of equal rates: the enum's order breaks ties
  for (int k = 0; k < kernels::kAttentionKinds; ++k)
    if (agrees(k) && (best < 0 || rates[k] > rates[best])) best = k;
  const std::string at = timed_at.empty() ? "" : " at " + timed_at;
  const std::string apart = list_kinds(differs, [&](int k) { return diffs[k]; });
  if (best < 0 && !apart.empty()) {
    char most[32];
    std::snprintf(most, sizeof(most), "%.3g", bound);
    throw ConfigError("kernels.attention=auto: no attention kind agrees with another on this device (" + apart +
                      ": each the relative difference of its results from the nearest other's" + at + ", above " +
                      most + "): a kernel is miscompiled for it or the device is faulty; set kernels.attention to a "
                      "kind whose tests pass here (ctest -R attention)");
  }
  if (best < 0) {
    c.kind = fallback;
    c.reason = "no candidate was timed";
    return c;
  }
  c.kind = static_cast<AttentionKind>(best);
  c.reason = std::string(name_of(precision)) + " fwd+bwd TFLOP/s: " + list_kinds(agrees, [&](int k) { return rates[k]; }) +
             at + (apart.empty() ? "" : "; left out, their results apart from the others' (relative difference): " + apart);
  return c;
}

std::string describe(const AttentionChoice& c) {
  if (c.setting != AttentionSetting::automatic) return "";
  return std::string(name_of(c.kind)) + " (" + c.reason + ")";
}

}  // namespace kformer
