// kernels.attention=auto as kformer's start-up would resolve it on a profile's machine (issue 37,
// item 2: the default `kformer` system is kformer's own run there). Start-up times every kind the
// build runs whose memory estimate fits (app.cpp, resolve_attention) and takes the fastest; predict
// takes, among the kinds the profile rates, the least forward and backward time at the run's own
// attention shape (attention_us) whose memory estimate fits the device (a kind that keeps the T*T
// probabilities may not), and fused where none does, as start-up falls back.
//
// The kinds the profile rates in the run's precision:
// - those in attention_tflops (a datasheet profile's naive and fused) or in calibrate's timed points
//   (attention.points: every kind the calibrated build ran, batched_gemm and vendor included);
// - vendor (kformer's cuDNN kernel, bf16 only) where the profile gives cuDNN's published rates
//   (cudnn_forward_tflops), costed as predict.attention=cudnn;
// - batched_gemm (kformer's batched vendor GEMMs) where it gives batched_gemm_tflops, costed as
//   predict.attention=batched_gemm.
// A kind the profile does not rate is no candidate: its cost would be a guess. `fused` wins ties.
#pragma once

#include <vector>

#include "plan/run_plan.hpp"
#include "predict/machine_profile.hpp"
#include "settings/run_settings.hpp"

namespace kformer::predict {

// The candidates, fastest first (kernels.attention's own kind alone where the deck names one).
std::vector<AttentionKind> attention_candidates(const RunSettings& s, const MachineProfile& p);

// The fastest candidate, without the memory check (no Kokkos needed).
AttentionKind costed_attention(const RunSettings& s, const MachineProfile& p);

// The fastest candidate whose memory estimate, with the profile's process baseline, fits the device
// (memory.limit_gb where set, else the profile's memory_gb); fused where none fits. Under
// another system's attention (predict.attention), auto is `fused`: the kind then only sizes the
// memory, as a flash kernel keeps its row statistics (rows with materialised scores name naive).
// `layout` is plan_without_memory's. Describes a step for each kind it checks: needs Kokkos.
AttentionKind costed_attention(const RunPlan& layout, const MachineProfile& p);

// The bytes a rank has: memory.limit_gb where set, else the profile's memory_gb.
double device_bytes(const RunSettings& s, const MachineProfile& p);
// A peak per rank within `device` bytes (0: unknown, so anything is).
inline bool within_device(double peak_bytes, double device) { return device <= 0 || peak_bytes <= device; }
// The memory check predict's report and the choice above share: peak (the estimate and the
// profile's process baseline) against device_bytes.
bool fits_device(const RunPlan& plan, const MachineProfile& p);

}  // namespace kformer::predict
