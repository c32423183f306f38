// What each predict.* key that departs from kformer's own run costs (see key_costs.hpp).
#include "predict/key_costs.hpp"

#include <algorithm>
#include <functional>
#include <iomanip>
#include <sstream>

#include "plan/run_plan.hpp"
#include "predict/attention_auto.hpp"
#include "predict/kernel_costs.hpp"
#include "predict/own_build.hpp"
#include "predict/step_sim.hpp"
#include "settings/schema.hpp"

namespace kformer::predict {
namespace {

struct KeyField {
  const char* key;
  std::function<std::string(const PredictSettings&)> value;
  std::function<void(PredictSettings&, const PredictSettings&)> reset;  // to kformer's (the second)
};

template <class T>
KeyField field(const char* key, T PredictSettings::*member) {
  return {key,
          [member](const PredictSettings& p) {
            if constexpr (std::is_same_v<T, double>) return format_value(p.*member);
            else return std::string(name_of(p.*member));
          },
          [member](PredictSettings& p, const PredictSettings& own) { p.*member = own.*member; }};
}

const std::vector<KeyField>& fields() {
  static const std::vector<KeyField> all = {
      field("predict.attention", &PredictSettings::attention),
      field("predict.attention_dropout", &PredictSettings::attention_dropout),
      field("predict.pipeline_p2p", &PredictSettings::pipeline_p2p),
      field("predict.grad_reduce", &PredictSettings::grad_reduce),
      field("predict.grad_accumulate", &PredictSettings::grad_accumulate),
      field("predict.bucket_pass", &PredictSettings::bucket_pass),
      field("predict.embedding_grad", &PredictSettings::embedding_grad),
      field("predict.tp_comm", &PredictSettings::tp_comm),
      field("predict.tp_input_grad", &PredictSettings::tp_input_grad),
      field("predict.tp_precision", &PredictSettings::tp_precision),
      field("predict.param_gather", &PredictSettings::param_gather),
      field("predict.gather_copy", &PredictSettings::gather_copy),
      field("predict.scatter_copy", &PredictSettings::scatter_copy),
      field("predict.zero3_gather", &PredictSettings::zero3_gather),
      field("predict.pipeline_messages", &PredictSettings::pipeline_messages),
      field("predict.pipeline_calls", &PredictSettings::pipeline_calls),
      field("predict.residual", &PredictSettings::residual),
      field("predict.rmsnorm", &PredictSettings::rmsnorm),
      field("predict.pointwise", &PredictSettings::pointwise),
      field("predict.logits", &PredictSettings::logits),
      field("predict.loss", &PredictSettings::loss),
      field("predict.train_metrics", &PredictSettings::train_metrics),
      field("predict.host", &PredictSettings::host),
  };
  return all;
}

}  // namespace

RunPlan costed_layout(const RunSettings& settings, const MachineProfile& profile) {
  RunPlan layout = on_own_build(plan_without_memory(settings), profile);
  layout.attention = costed_attention(layout, profile);
  return layout;
}

double predicted_step_ms(const RunSettings& settings, const MachineProfile& profile) {
  return predict_step(costed_layout(settings, profile), profile, false).step_ms;
}

std::vector<KeyCost> key_costs(const RunSettings& given, const MachineProfile& profile) {
  const PredictSettings own;  // kformer's behaviour: every key's default
  std::vector<KeyCost> out;
  for (const KeyField& f : fields()) {
    const std::string value = f.value(given.predict), kformer_value = f.value(own);
    if (value == kformer_value) continue;
    RunSettings without = given;
    f.reset(without.predict, own);
    out.push_back({f.key, value, kformer_value, predicted_step_ms(without, profile)});
  }
  return out;
}

std::string add_key_costs(nlohmann::json& report, const RunSettings& given, const MachineProfile& profile,
                          double step_ms) {
  nlohmann::json costs = nlohmann::json::array();
  std::ostringstream text;
  text << std::fixed << std::setprecision(1)
       << "  what the keys cost (ms of the step, each key alone set back to kformer's value):";
  // Writes "+12.3 (4.5%; the step 270.1": what the step costs over one without, its share, that step.
  const auto cost = [&](double without) {
    const double delta = step_ms - without;
    text << (delta >= 0 ? "+" : "") << delta << " (" << 100 * delta / step_ms << "%; the step " << without;
    return delta;
  };
  for (const KeyCost& k : key_costs(given, profile)) {
    text << "\n    " << k.key << "=" << k.value << " ";
    const double delta = cost(k.without_ms);
    text << " with " << k.kformer_value << ")";
    costs.push_back({{"key", k.key}, {"value", k.value}, {"kformer_value", k.kformer_value},
                     {"step_ms_without", k.without_ms}, {"cost_ms", delta}});
  }
  if (costs.empty()) text << " none departs from kformer's";
  report["predicted"]["key_costs"] = costs;
  // The profile's figures beside the keys, each the step again on the profile without it: what the SMs
  // the collectives hold cost the compute beside them, and what the measured floor under batched-GEMM
  // attention costs where the run's precision has one (said only where it binds).
  const auto figure = [&](double without, const char* key, const char* what, const char* baseline) {
    text << "\n  " << what << ": ";
    report["predicted"][key] = cost(without);
    text << " " << baseline << ")";
  };
  // The profile's figures are taken away with kformer's attention kind held: without batched_gemm_tflops
  // a profile no longer rates batched_gemm for auto (attention_auto.hpp), which is not the figure's cost.
  RunSettings held = given;
  if (held.kernels.attention == AttentionSetting::automatic)
    held.kernels.attention = setting_of(costed_layout(given, profile).attention);
  if (profile.holds_collective_sms()) {
    MachineProfile none = profile;
    none.collective_sms_intra = none.collective_sms_inter = 0;
    figure(predicted_step_ms(held, none), "collective_sms_cost_ms",
           "what the collectives' SMs cost the compute beside them (the profile's network.collective_sms)",
           "with none held");
  }
  if (!profile.rates(given.bf16()).batched_gemm_tflops.empty()) {
    MachineProfile modelled = profile;
    (given.bf16() ? modelled.bf16 : modelled.fp32).batched_gemm_tflops.clear();
    const double without = predicted_step_ms(held, modelled);
    if (without != step_ms)
      figure(without, "batched_gemm_floor_cost_ms",
             "what batched-GEMM attention's measured rate costs over its modelled passes (the profile's "
             "attention.batched_gemm_tflops)",
             "with the modelled passes");
  }
  // Rank 0's compute by what it is, largest first, with its share of their sum.
  std::vector<std::pair<double, std::string>> kernels;
  double sum = 0;
  for (const auto& [family, ms] : report["predicted"]["kernel_ms_by_family"].items())
    kernels.emplace_back(ms.get<double>(), family), sum += ms.get<double>();
  std::sort(kernels.rbegin(), kernels.rend());
  if (kernels.empty()) return text.str() + "\n";
  text << "\n  rank 0's compute by kernel family (ms of the step, each at the profile's cost; " << sum << " in all):";
  for (std::size_t i = 0; i < kernels.size(); ++i)
    text << (i % 4 == 0 ? "\n    " : " | ") << kernels[i].second << " " << kernels[i].first << " ("
         << 100 * kernels[i].first / sum << "%)";
  return text.str() + "\n";
}

}  // namespace kformer::predict
