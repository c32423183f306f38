// The kernel half of `kformer calibrate`: this machine's kernels timed at the shapes a deck runs
// (each GEMM of a block and the head, forward and backward, and causal attention of the deck's
// kind, in fp32 and in bf16 whichever the deck trains in; the memory-bound families at the deck's
// sizes, rated in GB/s over the bytes their calls describe), the launch overhead, the copy
// bandwidth and the FMA peak; each precision's GEMM efficiency curve is fitted to its GEMMs.
// Each tensor-parallel degree in `tps` is measured (its shapes are the rank's slices). Runs on the
// build's execution space; allocates only the buffers it times.
#pragma once

#include <vector>

#include "kernels/kernel_choice.hpp"
#include "settings/run_settings.hpp"
#include "predict/machine_profile.hpp"

namespace kformer::predict {

// Fills the kernel fields of `p`; measured points replace those of the same shape already in it.
// `impl`: the GEMM a run of the deck takes on this machine (kernels.gemm, auto resolved).
void calibrate_kernels(const RunSettings& cfg, kernels::GemmImpl impl, const std::vector<int>& tps, MachineProfile& p);
// Each precision's GEMM curve fitted again to its points (after median_of_rounds has changed them).
void fit_kernel_curves(MachineProfile& p);

}  // namespace kformer::predict
