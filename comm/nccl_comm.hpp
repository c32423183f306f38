// The `nccl` backend (built with KFORMER_ENABLE_NCCL): device buffers only. MPI bootstraps it
// (the unique id is broadcast over MPI) and serves split and barrier; NCCL moves the data.
//
// Every call runs on the process's communication stream (comm_stream.hpp), not on the compute
// stream of the Kokkos::Cuda instance: an event recorded on the compute stream when the call is
// posted orders it after the kernels that wrote its buffers, and the compute queued after it runs
// alongside, so a bucket's all-reduce overlaps the backward of the next layers.
//
// Blocking calls wait for their end on the host before returning, so they mean the same as on
// MPI (the result is there, the time spent is real; later compute, queued after the return, sees
// it). Non-blocking calls return at once; Request::test/wait ask the call's end event, and once
// they report completion the result is visible to any compute queued afterwards. Each call is
// timed with events on the communication stream: a non-blocking request reports that device span
// (Request::device_span), which the trace uses instead of post-to-completion.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <Kokkos_Core.hpp>

#include <atomic>
#include <memory>
#include <vector>

#include "comm_stream.hpp"
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
  // Blocking calls: fences the compute stream (the call waits for it anyway). Non-blocking calls
  // wait for the compute on the device, so the host goes on queueing kernels: nothing to do.
  void fence_compute(bool blocking) override;

  ncclComm_t handle() const { return nccl_; }

 private:
  NcclComm(MpiHandle mpi, Kokkos::Cuda exec, ncclComm_t nccl, std::shared_ptr<CommStream> stream);
  // Checks the buffers, orders the communication stream after the compute, and queues `ops` there
  // (in one NCCL group when `group`) between the call's timing events.
  CommStream::Call post(const std::vector<Op>& ops, bool group);
  void enqueue(const Op& op);

  MpiHandle mpi_;
  Kokkos::Cuda exec_;
  std::shared_ptr<CommStream> stream_;  // shared by every split; released after ncclCommDestroy
  ncclComm_t nccl_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  std::atomic<bool> aborted_{false};  // after abort_calls, the NCCL communicator is gone
};

}  // namespace kformer::comm
