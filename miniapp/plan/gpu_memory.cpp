// The memory estimate against the GPUs of the job (see gpu_memory.hpp).
#include "plan/gpu_memory.hpp"

#include <Kokkos_Core.hpp>

#include "comm/views.hpp"
#include "platform/device.hpp"
#include "plan/memory.hpp"
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace kformer {

double gpu_memory_bytes() {
#if defined(KOKKOS_ENABLE_CUDA)
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return double(total_b);
#endif
  return 0;
}

void check_fits_gpus(const RunPlan& plan, comm::Communicator& world, double my_gpu_bytes) {
  if (plan.settings.memory_limit_gb > 0) return;  // every rank: the user's own limit, checked before
  // The smallest GPU as the largest of the negated sizes (the communicator reduces sum and max);
  // a rank without one offers the most negative number, which never wins. In the execution
  // space's memory: NCCL takes no host buffers.
  constexpr double kNone = -1e300;
  const auto v = device_buffer<double*>("kformer::gpu_memory", 1);
  Kokkos::deep_copy(v, my_gpu_bytes > 0 ? -my_gpu_bytes : kNone);
  comm::allreduce(world, v, comm::ReduceOp::max);
  double neg = 0;
  Kokkos::deep_copy(neg, Kokkos::subview(v, 0));
  if (neg <= kNone) return;
  check_estimate_fits(plan.settings, plan.memory, -neg, "of the smallest GPU of the job", "or set memory.limit_gb to override this check");
}

}  // namespace kformer
