// comm.backend=auto (see backend_choice.hpp).
#include "backend_choice.hpp"

#include <Kokkos_Core.hpp>

#include "kformer_config.hpp"

namespace kformer::comm {

BackendChoice choose_backend(const std::string& requested, bool build_has_nccl, bool build_has_mpi, bool on_gpu,
                             int world_size) {
  if (requested != "auto") return {requested, "as asked"};
  if (build_has_nccl && on_gpu) return {"nccl", "NCCL build, ranks on GPUs"};
  if (build_has_mpi) return {"mpi", build_has_nccl ? "ranks not on GPUs" : "no NCCL in this build"};
  // Without MPI the job is one process; make_world says what to do should it be more.
  return {"self", world_size == 1 ? "no MPI in this build, one process" : "no MPI in this build"};
}

BackendChoice resolve_backend(const std::string& requested, int world_size) {
  using Mem = Kokkos::DefaultExecutionSpace::memory_space;
  const bool on_gpu = !Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible;
  return choose_backend(requested, KFORMER_ENABLE_NCCL, KFORMER_ENABLE_MPI, on_gpu, world_size);
}

}  // namespace kformer::comm
