// The memory estimate against the GPUs of the job. The check before Kokkos starts (check_plan_fits)
// compares it with the node's host memory; under CUDA the parameters, gradients, optimizer states
// and activations live on the GPU, so once Kokkos runs it is also compared with the smallest GPU
// of the job. Collective, so that every rank reaches the same verdict even on mixed GPUs.
#pragma once

#include "comm/communicator.hpp"
#include "plan/run_plan.hpp"

namespace kformer {

// This rank's GPU memory in bytes (cudaMemGetInfo's total); 0 without CUDA or when unknown.
double gpu_memory_bytes();

// Every rank of `world` calls it with its own GPU's memory (0: none or unknown). With
// memory.limit_gb unset, throws ConfigError on every rank when the estimate per rank exceeds the
// smallest known one; nothing when no rank knows one (host builds).
void check_fits_gpus(const RunPlan& plan, comm::Communicator& world, double my_gpu_bytes);

}  // namespace kformer
