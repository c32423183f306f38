// The `mpi` backend: any MPI library. Buffers may be host memory or, under a CUDA Kokkos, device
// memory: a CUDA-aware MPI reads those itself, any other MPI gets them staged through host copies
// (said once on stderr, since it costs two copies per call).
#pragma once

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <vector>

#include "communicator.hpp"
#include "mpi_handle.hpp"

namespace kformer::comm {

// The MPI_COMM_WORLD rank of each member of `comm`, in rank order (no communication).
std::vector<int> world_ranks_of(MPI_Comm comm);

class MpiComm final : public Communicator {
 public:
  // Wraps `comm`; frees it on destruction only when `owned` (never MPI_COMM_WORLD). `exec` is
  // fenced before MPI touches a buffer, because kernels that write it may still be running.
  // `rendezvous` (comm.strict): sends are synchronous (MPI_Ssend/MPI_Issend), completing only once
  // the receive is posted, as NCCL's may; MPI's own sends may buffer and hide a missing group.
  MpiComm(MPI_Comm comm, bool owned, Kokkos::DefaultExecutionSpace exec = Kokkos::DefaultExecutionSpace(),
          bool rendezvous = false);
  MpiComm(MpiHandle comm, Kokkos::DefaultExecutionSpace exec, bool rendezvous = false);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  std::vector<int> world_ranks() const override { return world_ranks_of(comm_.get()); }
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override;
  void run(const Op& op) override;
  Request start(const Op& op) override;
  Request start_group(const std::vector<Op>& ops) override;

  MPI_Comm handle() const { return comm_.get(); }

  // Whether this MPI reads and writes CUDA device memory itself: MPIX_Query_cuda_support where
  // the MPI has it, overridden by KFORMER_MPI_CUDA_AWARE=0/1 (for MPIs that cannot say, e.g.
  // Cray MPICH with MPICH_GPU_SUPPORT_ENABLED=1).
  static bool cuda_aware();

 private:
  MpiHandle comm_;
  int rank_ = 0;
  int size_ = 1;
  Kokkos::DefaultExecutionSpace exec_;
  bool rendezvous_ = false;
};

}  // namespace kformer::comm
