// The largest micro-batch whose predicted peak per rank fits the device (predict.largest_micro_batch):
// the question a user otherwise answers by running out of memory. Tries each divisor of the
// sequences a data-parallel rank takes a step (train.global_batch / dp), largest first, at the
// deck's other settings, and stops at the first whose peak (as predict.memory counts it, with the
// profile's process baseline) is within the device's bytes; a micro-batch the deck's checks refuse
// (fewer micro-batches than pipeline stages, a sequence-parallel split) is skipped.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "predict/machine_profile.hpp"
#include "settings/run_settings.hpp"

namespace kformer::predict {

struct LargestFit {
  int local_batch = 0;   // sequences a data-parallel rank takes a step
  int micro_batch = 0;   // the largest that fits; 0: none does
  double peak_bytes = 0;  // its predicted peak (or, when none fits, micro-batch 1's)
  double device_bytes = 0;
  std::string counted_as;  // predict.memory
  nlohmann::json to_json() const;
  std::string text() const;  // the summary's line
};

// `args`: the command line predict was given (the deck and its overrides); `given`: its settings.
LargestFit largest_fitting_micro_batch(const std::vector<std::string>& args, const RunSettings& given,
                                       const MachineProfile& profile);

}  // namespace kformer::predict
