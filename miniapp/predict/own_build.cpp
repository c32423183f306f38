// kformer's own build on a profile's machine (see own_build.hpp).
#include "predict/own_build.hpp"

namespace kformer::predict {

RunPlan on_own_build(RunPlan layout, const MachineProfile& p) {
  if (layout.settings.predict.system != PredictSettings().system || p.kformer_build != kernels::CodePath::cuda) return layout;
  layout.code_path = kernels::CodePath::cuda;
  if (layout.settings.kernels.gemm == GemmSetting::automatic) layout.gemm = kernels::GemmImpl::vendor;
  return layout;
}

}  // namespace kformer::predict
