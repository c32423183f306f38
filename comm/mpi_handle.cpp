// MPI communicator handles (see mpi_handle.hpp).
#include "mpi_handle.hpp"

#include <stdexcept>
#include <string>

namespace kformer::comm {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string("MPI error in ") + what + ": " + std::string(msg, len));
}

MpiHandle::MpiHandle(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {}

MpiHandle::MpiHandle(MpiHandle&& other) noexcept : comm_(other.comm_), owned_(other.owned_) {
  other.comm_ = MPI_COMM_NULL;
  other.owned_ = false;
}

MpiHandle::~MpiHandle() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After MPI_Finalize every communicator is gone already; freeing would be an error.
  if (owned_ && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

int MpiHandle::rank() const {
  int r = 0;
  check_mpi(MPI_Comm_rank(comm_, &r), "MPI_Comm_rank");
  return r;
}

int MpiHandle::size() const {
  int n = 1;
  check_mpi(MPI_Comm_size(comm_, &n), "MPI_Comm_size");
  return n;
}

MpiHandle MpiHandle::split(int color, int key) const {
  if (color < 0)
    throw std::invalid_argument("comm split: color " + std::to_string(color) +
                                " is negative: every rank needs a color >= 0");
  MPI_Comm out = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_, color, key, &out), "MPI_Comm_split");
  return MpiHandle(out, true);
}

}  // namespace kformer::comm
