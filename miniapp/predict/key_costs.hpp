// What each predict.* key that departs from kformer's own run costs the predicted step
// (predict.breakdown): for every such key, the step predicted with that key alone set back to
// kformer's value, and the difference. A system's preset sets several keys; this says which of
// them the prediction's distance from kformer's own run comes from (each key's share given the
// others: they interact, e.g. the attention's dropout applies to batched_gemm's kernels only).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/run_plan.hpp"
#include "predict/machine_profile.hpp"
#include "settings/run_settings.hpp"

namespace kformer::predict {

struct KeyCost {
  std::string key, value, kformer_value;
  double without_ms = 0;  // the step with this key at kformer_value, the others as given
};

// One entry per predict.* key whose value in `given` differs from kformer's; the steps are
// predicted as `kformer predict` predicts them (kernels.attention=auto resolved on `profile`).
std::vector<KeyCost> key_costs(const RunSettings& given, const MachineProfile& profile);

// The layout kformer predict costs: kernels.attention=auto resolved on `profile` (attention_auto.hpp,
// which describes a step where a kind keeping the probabilities needs its memory checked), without
// the layout's own memory estimate.
RunPlan costed_layout(const RunSettings& settings, const MachineProfile& profile);

// The predicted step of `settings` on `profile`, as kformer predict makes it, in ms.
double predicted_step_ms(const RunSettings& settings, const MachineProfile& profile);

// predict.breakdown: key_costs of `given` against the step predicted for it (`step_ms`), put in the
// report's predicted.key_costs, and where the profile gives network.collective_sms, what they cost
// (the step again with none held: predicted.collective_sms_cost_ms); returns the summary's lines.
std::string add_key_costs(nlohmann::json& report, const RunSettings& given, const MachineProfile& profile,
                          double step_ms);

}  // namespace kformer::predict
