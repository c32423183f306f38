// An MPI communicator handle that frees itself when owned (never MPI_COMM_WORLD), its split,
// and the MPI error check: shared by the mpi backend and the nccl backend, which bootstraps
// and splits through MPI.
#pragma once

#include <mpi.h>

namespace kformer::comm {

// Throws std::runtime_error with MPI's own text for a failed MPI call.
void check_mpi(int rc, const char* what);

class MpiHandle {
 public:
  MpiHandle(MPI_Comm comm, bool owned);
  ~MpiHandle();
  MpiHandle(MpiHandle&& other) noexcept;
  MpiHandle& operator=(MpiHandle&&) = delete;
  MpiHandle(const MpiHandle&) = delete;
  MpiHandle& operator=(const MpiHandle&) = delete;

  MPI_Comm get() const { return comm_; }
  int rank() const;
  int size() const;
  // MPI_Comm_split; a negative color is refused (MPI_UNDEFINED would leave this rank with no
  // communicator, which no Communicator can represent).
  MpiHandle split(int color, int key) const;

 private:
  MPI_Comm comm_;
  bool owned_;
};

}  // namespace kformer::comm
