// The largest micro-batch that fits (largest_fit.hpp).
#include "predict/largest_fit.hpp"

#include <sstream>

#include "platform/errors.hpp"
#include "predict/attention_auto.hpp"
#include "predict/key_costs.hpp"
#include "predict/predict_report.hpp"
#include "settings/prediction_deck.hpp"
#include "train/make_plan.hpp"

namespace kformer::predict {

nlohmann::json LargestFit::to_json() const {
  return {{"local_batch", local_batch}, {"micro_batch", micro_batch}, {"peak_bytes", peak_bytes},
          {"device_bytes", device_bytes}, {"counted_as", counted_as}};
}

namespace {
// "composer_mpt counts it", "kformer's own step holds it"
std::string whose(const std::string& counted_as) {
  return counted_as == "kformer" ? "kformer's own step holds it" : counted_as + " counts it";
}
}  // namespace

std::string LargestFit::text() const {
  std::ostringstream o;
  o.precision(3);
  o << "  largest fit      ";
  if (micro_batch > 0)
    o << "micro-batch " << micro_batch << " of the " << local_batch << " sequences a data-parallel rank takes a step ("
      << peak_bytes / 1e9 << " GB predicted peak per rank of " << device_bytes / 1e9 << ", as " << whose(counted_as) << ")\n";
  else
    o << "none: micro-batch 1 of the " << local_batch << " sequences a data-parallel rank takes a step needs "
      << peak_bytes / 1e9 << " GB per rank of " << device_bytes / 1e9 << " (as " << whose(counted_as)
      << "): more ranks to shard or split the model, or recomputation\n";
  return o.str();
}

LargestFit largest_fitting_micro_batch(const std::vector<std::string>& args, const RunSettings& given,
                                       const MachineProfile& profile) {
  LargestFit f;
  f.local_batch = static_cast<int>(given.train.global_batch / given.parallel.dp);
  f.device_bytes = device_bytes(given, profile);
  f.counted_as = name_of(given.predict.memory);
  for (int m = f.local_batch; m >= 1; --m) {
    if (f.local_batch % m != 0) continue;
    std::vector<std::string> a = args;
    a.push_back("train.micro_batch=" + std::to_string(m));
    a.push_back("parallel.microbatches=0");  // derived again from the new micro-batch
    RunPlan plan;
    try {
      const RunSettings s = read_prediction_deck("predict", a, false).settings;
      plan = costed_layout(s, profile);
      if (s.predict.memory == MemoryModel::kformer) plan = with_memory(plan);
    } catch (const ConfigError&) {
      continue;  // a micro-batch this layout cannot take
    }
    f.peak_bytes = predicted_peak_bytes(plan, profile);
    if (within_device(f.peak_bytes, f.device_bytes)) {
      f.micro_batch = m;
      break;
    }
  }
  return f;
}

}  // namespace kformer::predict
