// The `nccl` backend (built with KFORMER_ENABLE_NCCL): device buffers only, every call on the
// CUDA stream of a Kokkos::Cuda instance, so communication is ordered with the kernels that
// produce and consume its buffers. MPI bootstraps it (the unique id is broadcast over MPI) and
// serves split and barrier; NCCL moves the data.
//
// Blocking calls synchronise the stream before returning, so they mean the same as on MPI (the
// result is there, the time spent is real); non-blocking calls record a CUDA event that
// Request::test/wait query, so kernels queued after them on other streams may overlap.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <Kokkos_Core.hpp>

#include <atomic>
#include <vector>

#include "communicator.hpp"
#include "mpi_handle.hpp"

namespace kformer::comm {

class NcclComm final : public Communicator {
 public:
  // Collective over `comm`: creates one NCCL communicator for its ranks. Frees `comm` on
  // destruction only when `owned`.
  NcclComm(MPI_Comm comm, bool owned, Kokkos::Cuda exec = Kokkos::Cuda());
  ~NcclComm() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  std::vector<int> world_ranks() const override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override;
  void run(const Op& op) override;
  Request start(const Op& op) override;
  Request start_group(const std::vector<Op>& ops) override;
  // ncclCommAbort: the watchdog's way to stop kernels that wait for a dead or hung peer.
  void abort_calls() noexcept override;

  ncclComm_t handle() const { return nccl_; }

 private:
  NcclComm(MpiHandle mpi, Kokkos::Cuda exec, ncclComm_t nccl);
  void enqueue(const Op& op);

  MpiHandle mpi_;
  Kokkos::Cuda exec_;
  ncclComm_t nccl_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  std::atomic<bool> aborted_{false};  // after abort_calls, the NCCL communicator is gone
};

}  // namespace kformer::comm
