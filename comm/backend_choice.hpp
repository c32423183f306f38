// comm.backend=auto, the default: which backend a run gets when the deck names none. NCCL when the
// build has it and the ranks run on GPUs (the MPI backend would stage every collective through
// host memory there), MPI otherwise, and self where the build has no MPI (one process). A pure
// function of the facts, so that the GPU branch is tested on any machine; resolve_backend feeds
// it this build's.
#pragma once

#include <string>

namespace kformer::comm {

struct BackendChoice {
  std::string backend;  // "nccl", "mpi" or "self"
  std::string reason;   // why, for the start-up lines and the report: "no NCCL in this build"
};

// `requested` is comm.backend: "auto" is decided from the other arguments; any other name is
// kept as given (reason "as asked"). `on_gpu`: the ranks' execution space runs on GPUs.
BackendChoice choose_backend(const std::string& requested, bool build_has_nccl, bool build_has_mpi, bool on_gpu,
                             int world_size);

// choose_backend with this build's facts (KFORMER_ENABLE_NCCL, KFORMER_ENABLE_MPI, and whether
// Kokkos' default execution space runs on a GPU).
BackendChoice resolve_backend(const std::string& requested, int world_size);

}  // namespace kformer::comm
