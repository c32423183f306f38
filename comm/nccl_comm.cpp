// The `nccl` backend (see nccl_comm.hpp).
#include "nccl_comm.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "mpi_comm.hpp"  // world_ranks_of

namespace kformer::comm {
namespace {

void check(ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  throw std::runtime_error(std::string("NCCL error in ") + what + ": " + ncclGetErrorString(rc) +
                           " (NCCL_DEBUG=WARN prints NCCL's own reason)");
}

void check(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(rc));
}

ncclDataType_t to_nccl(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
  }
  return ncclFloat32;
}

ncclRedOp_t to_nccl(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : ncclMax; }

// NCCL reads device memory only; a host pointer would fault inside a kernel, far from the cause.
void require_device(const void* p, const Op& op) {
  cudaPointerAttributes attr{};
  const bool device = cudaPointerGetAttributes(&attr, p) == cudaSuccess &&
                      (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged);
  if (!device) {
    cudaGetLastError();
    throw std::invalid_argument(std::string("comm nccl ") + op_name(op.kind) +
                                ": the buffer is host memory; NCCL moves device memory only: allocate the "
                                "View in Kokkos::DefaultExecutionSpace::memory_space, or use comm.backend=mpi");
  }
}

ncclComm_t init_over_mpi(MPI_Comm comm) {
  int rank = 0, size = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  ncclUniqueId id{};
  if (rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  check_mpi(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm), "MPI_Bcast of the NCCL unique id");
  ncclComm_t out = nullptr;
  check(ncclCommInitRank(&out, size, id, rank), "ncclCommInitRank");
  return out;
}

class NcclRequest final : public Request::Impl {
 public:
  explicit NcclRequest(cudaStream_t stream) {
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(event_, stream), "cudaEventRecord");
  }
  ~NcclRequest() override { cudaEventDestroy(event_); }
  bool test() override {
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    check(rc, "cudaEventQuery");
    return true;
  }
  void wait() override { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace

NcclComm::NcclComm(MPI_Comm comm, bool owned, Kokkos::Cuda exec)
    : NcclComm(MpiHandle(comm, owned), exec, init_over_mpi(comm)) {}

NcclComm::NcclComm(MpiHandle mpi, Kokkos::Cuda exec, ncclComm_t nccl)
    : mpi_(std::move(mpi)), exec_(exec), nccl_(nccl) {
  check(ncclCommUserRank(nccl_, &rank_), "ncclCommUserRank");
  check(ncclCommCount(nccl_, &size_), "ncclCommCount");
  const int mpi_rank = mpi_.rank();
  if (mpi_rank != rank_)
    throw std::logic_error("comm nccl: NCCL rank " + std::to_string(rank_) + " differs from MPI rank " +
                           std::to_string(mpi_rank) + " after a split: report this as a kformer bug");
}

NcclComm::~NcclComm() {
  if (nccl_ && !aborted_) ncclCommDestroy(nccl_);
}

std::vector<int> NcclComm::world_ranks() const { return world_ranks_of(mpi_.get()); }

void NcclComm::abort_calls() noexcept {
  if (nccl_ && !aborted_.exchange(true)) ncclCommAbort(nccl_);
}

std::unique_ptr<Communicator> NcclComm::split(int color, int key) {
  MpiHandle sub = mpi_.split(color, key);  // refuses negative colors: to NCCL they mean "no group"
  ncclComm_t nccl = nullptr;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  // Shares the parent's resources where NCCL can; same color/key ordering as MPI_Comm_split.
  check(ncclCommSplit(nccl_, color, key, &nccl, nullptr), "ncclCommSplit");
#else
  nccl = init_over_mpi(sub.get());
#endif
  return std::unique_ptr<Communicator>(new NcclComm(std::move(sub), exec_, nccl));
}

void NcclComm::barrier() {
  exec_.fence();
  check_mpi(MPI_Barrier(mpi_.get()), "MPI_Barrier");
}

void NcclComm::enqueue(const Op& op) {
  if (op.send) require_device(op.send, op);
  if (op.recv) require_device(op.recv, op);
  const cudaStream_t s = exec_.cuda_stream();
  const ncclDataType_t t = to_nccl(op.type);
  switch (op.kind) {
    case OpKind::allreduce:
      check(ncclAllReduce(op.send, op.recv, op.count, t, to_nccl(op.reduce), nccl_, s), "ncclAllReduce");
      break;
    case OpKind::reduce_scatter:
      check(ncclReduceScatter(op.send, op.recv, op.count, t, to_nccl(op.reduce), nccl_, s), "ncclReduceScatter");
      break;
    case OpKind::allgather: check(ncclAllGather(op.send, op.recv, op.count, t, nccl_, s), "ncclAllGather"); break;
    case OpKind::broadcast:
      check(ncclBroadcast(op.recv, op.recv, op.count, t, op.peer, nccl_, s), "ncclBroadcast");
      break;
    case OpKind::send: check(ncclSend(op.send, op.count, t, op.peer, nccl_, s), "ncclSend"); break;
    case OpKind::recv: check(ncclRecv(op.recv, op.count, t, op.peer, nccl_, s), "ncclRecv"); break;
  }
}

void NcclComm::run(const Op& op) {
  enqueue(op);
  check(cudaStreamSynchronize(exec_.cuda_stream()), "cudaStreamSynchronize");
}

Request NcclComm::start(const Op& op) {
  enqueue(op);
  return Request(std::make_unique<NcclRequest>(exec_.cuda_stream()));
}

Request NcclComm::start_group(const std::vector<Op>& ops) {
  check(ncclGroupStart(), "ncclGroupStart");
  try {
    for (const Op& op : ops) enqueue(op);
  } catch (...) {
    ncclGroupEnd();  // leave NCCL's group depth balanced for the caller's next call
    throw;
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
  return Request(std::make_unique<NcclRequest>(exec_.cuda_stream()));
}

}  // namespace kformer::comm
