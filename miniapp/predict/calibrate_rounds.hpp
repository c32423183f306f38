// Calibrate's kernel sweep taken in rounds. A busy moment on a node (another tenant, a daemon, the
// other rank's burst) inflates every figure measured inside it; one sweep times each kernel inside
// one 30 ms window, so a moment of a second moved a run of neighbouring GEMM shapes by 25-30% in
// one calibration of forty on a 2-core VM, and predict's step with them (docs/predict-validation.md).
// Taken in rounds, such a moment lands in one of them, and each figure is the median of its rounds.
#pragma once

#include <string>
#include <vector>

#include "predict/machine_profile.hpp"

namespace kformer::predict {

// The widest disagreement among the rounds: (max - min) / median of one figure.
struct RoundsSpread {
  int rounds = 0;
  double relative = 0;
  std::string figure;  // "bf16 GEMM 256x256x256 forward"
  // "the median of 3 rounds (widest spread 31% in bf16 GEMM 256x256x256 forward)"
  std::string describe() const;
};

// Figure by figure, the median of profiles measured alike (the same points in the same order, as
// calibrate_kernels leaves them from the same start); what no round measured is the first's.
// Throws std::logic_error when the rounds' points differ in shape.
MachineProfile median_of_rounds(const std::vector<MachineProfile>& rounds, RoundsSpread* spread);

}  // namespace kformer::predict
