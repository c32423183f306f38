// The `mpi` backend.
#include "mpi_comm.hpp"

#include <stdexcept>
#include <string>

namespace kformer::comm {
namespace {

MPI_Datatype to_mpi(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op to_mpi(ReduceOp op) { return op == ReduceOp::sum ? MPI_SUM : MPI_MAX; }

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string("MPI error in ") + what + ": " + std::string(msg, len));
}

}  // namespace

MpiComm::MpiComm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::unique_ptr<Communicator> MpiComm::split(int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color, key, &out), "MPI_Comm_split");
  return std::make_unique<MpiComm>(out, true);
}

void MpiComm::barrier() { check(MPI_Barrier(comm_), "MPI_Barrier"); }

void MpiComm::allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) {
  if (count == 0) return;
  const void* src = (send == recv) ? MPI_IN_PLACE : send;
  check(MPI_Allreduce(src, recv, static_cast<int>(count), to_mpi(type), to_mpi(op), comm_),
        "MPI_Allreduce");
}

}  // namespace kformer::comm
