// The `nccl` backend (see nccl_comm.hpp).
#include "nccl_comm.hpp"

#include <cuda_runtime.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "mpi_comm.hpp"  // world_ranks_of
#include "trace_log.hpp"

namespace kformer::comm {
namespace {

void check(ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  throw std::runtime_error(std::string("NCCL error in ") + what + ": " + ncclGetErrorString(rc) +
                           " (NCCL_DEBUG=WARN prints NCCL's own reason)");
}

ncclDataType_t to_nccl(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::bf16: return ncclBfloat16;  // sums accumulate in fp32 inside NCCL's kernels
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

// Completion is the call's end event on the communication stream; once it has completed, compute
// queued afterwards on any stream reads the result.
class NcclRequest final : public Request::Impl {
 public:
  NcclRequest(CommStream::Call call, std::shared_ptr<CommStream> stream)
      : call_(std::move(call)), stream_(std::move(stream)) {}
  bool test() override {
    if (!call_.end->query()) return false;
    span_ = CommStream::span_of(call_);
    return true;
  }
  void wait() override {
    call_.end->synchronize();
    span_ = CommStream::span_of(call_);
  }
  std::optional<DeviceSpan> device_span() const override { return span_; }

 private:
  CommStream::Call call_;
  std::shared_ptr<CommStream> stream_;  // kept until the call is over
  std::optional<DeviceSpan> span_;
};

}  // namespace

NcclComm::NcclComm(MPI_Comm comm, bool owned, Kokkos::Cuda exec)
    : NcclComm(MpiHandle(comm, owned), exec, init_over_mpi(comm), CommStream::shared()) {}

NcclComm::NcclComm(MpiHandle mpi, Kokkos::Cuda exec, ncclComm_t nccl, std::shared_ptr<CommStream> stream)
    : mpi_(std::move(mpi)), exec_(exec), stream_(std::move(stream)), nccl_(nccl) {
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
  return std::unique_ptr<Communicator>(new NcclComm(std::move(sub), exec_, nccl, stream_));
}

void NcclComm::barrier() {
  exec_.fence();
  check_mpi(MPI_Barrier(mpi_.get()), "MPI_Barrier");
}

void NcclComm::fence_compute(bool blocking) {
  if (blocking) exec_.fence();
}

CommStream::Call NcclComm::post(const std::vector<Op>& ops, bool group) {
  // Checked before anything is queued, so a refused call leaves no half-posted group behind.
  for (const Op& op : ops) {
    if (op.send) require_device(op.send, op);
    if (op.recv) require_device(op.recv, op);
  }
  CommStream::Call call = stream_->begin(exec_.cuda_stream());
  if (group) check(ncclGroupStart(), "ncclGroupStart");
  try {
    for (const Op& op : ops) enqueue(op);
  } catch (...) {
    if (group) ncclGroupEnd();  // leave NCCL's group depth balanced for the caller's next call
    throw;
  }
  if (group) check(ncclGroupEnd(), "ncclGroupEnd");
  stream_->end(call);
  return call;
}

void NcclComm::enqueue(const Op& op) {
  const cudaStream_t s = stream_->get();
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
  const CommStream::Call call = post({op}, false);
  call.end->synchronize();
  // The host saw the end just now: the freshest anchor for the device clock.
  stream_->reanchor(call, TraceLog::now_us());
}

Request NcclComm::start(const Op& op) {
  return Request(std::make_unique<NcclRequest>(post({op}, false), stream_));
}

Request NcclComm::start_group(const std::vector<Op>& ops) {
  return Request(std::make_unique<NcclRequest>(post(ops, true), stream_));
}

}  // namespace kformer::comm
