// The `mpi` backend: any MPI library, host buffers.
#pragma once

#include <mpi.h>

#include "communicator.hpp"

namespace kformer::comm {

class MpiComm final : public Communicator {
 public:
  // Wraps `comm`; frees it on destruction only when `owned` (never MPI_COMM_WORLD).
  MpiComm(MPI_Comm comm, bool owned);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override;
  void allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override;

  MPI_Comm handle() const { return comm_; }

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace kformer::comm
