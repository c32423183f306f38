// kformer's own run on a profile's machine (issue 37, item 2: the default system is kformer's own
// run there): the build that runs on it, and the GEMM that build's start-up takes for
// kernels.gemm=auto. On a GPU's profile (kformer_build: cuda) that is the CUDA build, whose vendor
// GEMM writes a bf16 output itself (cuBLASLt's bias and GELU epilogue, cuBLAS without a bias) and
// fuses the GELU's gradient into FC2's backward, so its bf16 run has no pass rounding a GEMM's
// fp32 output and no separate GELU backward; the host build's description has both. Start-up
// (app.cpp) times the native and the vendor GEMM and takes the faster: on a GPU the vendor, which
// runs bf16 on the tensor cores where the native GEMM runs on the CUDA cores (0.14-0.18 of cuBLAS's
// rate on the H200, and 0.38-1.05 in fp32: docs/PERFORMANCE.md).
#pragma once

#include "plan/run_plan.hpp"
#include "predict/machine_profile.hpp"

namespace kformer::predict {

// The layout with the code path and GEMM of kformer's build on the profile's machine, for
// predict.system=kformer; another system's layout as given (its presets cost its own kernels).
RunPlan on_own_build(RunPlan layout, const MachineProfile& p);

}  // namespace kformer::predict
