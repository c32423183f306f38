// Memory per rank: the estimate made before anything is allocated (parameters, gradients,
// optimizer states, activations of the micro-batches in flight, work buffers: what a described
// step makes, train/memory_estimate.cpp), the check of an estimate against the memory a rank has,
// and the high-water mark measured after the run.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "settings/run_settings.hpp"

namespace kformer {

// In bf16 (train.precision) params counts the fp32 masters and their bf16 copies (6 bytes a
// parameter: more than fp32's 4; under ZeRO-1/2 over dp > 1 the whole bf16 copy and this rank's
// shard of the masters, 2 + 4/dp), activations the bf16 ones kept for backward plus the fp32
// residual stream and statistics, workspace the extra bf16 gradient buffers.
struct MemoryEstimate {
  double params = 0, grads = 0, optimizer = 0, activations = 0, workspace = 0;  // bytes
  int micro_batches_in_flight = 1;
  bool bf16 = false;
  bool masters_sharded = false;  // bf16 under ZeRO-1/2 (ParamStore::masters_sharded)
  // The most activations any stage holds (the split above is the largest stage's by total, whose
  // activations may be fewer): what the run's largest activation_bytes is held to.
  double activations_most = 0;
  double total() const { return params + grads + optimizer + activations + workspace; }
  nlohmann::json to_json() const;
};

// "12.3 GB (params 1.2, grads 1.2, optimizer 2.4, activations 7.0, workspace 0.5; 1 micro-batch in flight)"
std::string describe(const MemoryEstimate& e);

// A run makes its estimate once (make_plan); estimates_made() counts them, for the test that says so.
std::atomic<long>& estimates_made();

// With memory.limit_gb unset, throws ConfigError when the estimate per rank `e` exceeds `bytes`, the
// memory a rank can count on, described as "the <bytes> GB <what>" in the message, which ends in
// the usual fixes plus `other_fix`. The checks of the node's memory and of the GPUs
// (gpu_memory.cpp) share it; memory.limit_gb, when set, is checked by check_plan_fits
// (train/make_plan.hpp).
void check_estimate_fits(const RunSettings& s, const MemoryEstimate& e, double bytes, const std::string& what,
                         const std::string& other_fix);

// The process's high-water mark: device memory in use under CUDA, else the peak resident set.
double measured_peak_bytes();

}  // namespace kformer
