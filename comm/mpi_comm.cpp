// The `mpi` backend. Every call goes through three steps: prepare (fence, choose MPI_IN_PLACE,
// stage device buffers through the host when MPI cannot read them), post (the blocking or the
// non-blocking MPI call), finish (copy staged results back, move an in-place reduce_scatter's
// result into this rank's slot).
#include "mpi_comm.hpp"

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>  // MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include "device_memory.hpp"

namespace kformer::comm {
namespace {

MPI_Datatype to_mpi(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::bf16: return MPI_UINT16_T;  // MPI has no bfloat16: 16-bit words, reduced by bf16_op
  }
  return MPI_DATATYPE_NULL;
}

// bfloat16 reductions. MPI's own ops would add the words as integers, so sum and max are
// user-defined: each pair is widened to fp32, combined, and rounded to nearest even once, as
// NCCL's bf16 kernels do (an allreduce over n ranks rounds at each of its n-1 combines; callers
// that want one rounding reduce in fp32). The conversions are kernels/bf16.hpp's, restated
// because comm/ knows no kernels/; the conformance tests hold the two to the same results.
float bf16_word_to_float(std::uint16_t w) {
  const std::uint32_t u = static_cast<std::uint32_t>(w) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
std::uint16_t bf16_word_from_float(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN: quiet
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
template <bool kSum>
void bf16_combine(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = bf16_word_to_float(a[i]), y = bf16_word_to_float(b[i]);
    b[i] = bf16_word_from_float(kSum ? x + y : (x > y ? x : y));
  }
}

// The two ops, created at the first bf16 reduction and freed inside MPI_Finalize, by the delete
// callback of an attribute on MPI_COMM_SELF (which MPI_Finalize deletes first, for such hooks).
struct Bf16Ops {
  MPI_Op sum = MPI_OP_NULL, max = MPI_OP_NULL;
};
Bf16Ops g_bf16_ops;
const Bf16Ops& bf16_ops() {
  Bf16Ops& ops = g_bf16_ops;
  if (ops.sum == MPI_OP_NULL) {
    check_mpi(MPI_Op_create(&bf16_combine<true>, 1, &ops.sum), "MPI_Op_create (bfloat16 sum)");
    check_mpi(MPI_Op_create(&bf16_combine<false>, 1, &ops.max), "MPI_Op_create (bfloat16 max)");
    int key = MPI_KEYVAL_INVALID;
    const auto free_ops = [](MPI_Comm, int keyval, void*, void*) -> int {
      MPI_Op_free(&g_bf16_ops.sum);
      MPI_Op_free(&g_bf16_ops.max);
      MPI_Comm_free_keyval(&keyval);
      return MPI_SUCCESS;
    };
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_ops, &key, nullptr), "MPI_Comm_create_keyval");
    check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr), "MPI_Comm_set_attr");
  }
  return ops;
}

MPI_Op to_mpi(ReduceOp op, DType t) {
  if (t == DType::bf16) return op == ReduceOp::sum ? bf16_ops().sum : bf16_ops().max;
  return op == ReduceOp::sum ? MPI_SUM : MPI_MAX;
}

int mpi_count(const Op& op) {
  if (op.count > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument(std::string("comm mpi ") + op_name(op.kind) + ": " + std::to_string(op.count) +
                                " elements exceed MPI's int count: split the buffer into smaller calls");
  return static_cast<int>(op.count);
}

struct CopyBack {
  void* dst;
  const void* src;
  std::size_t bytes;
};

// One call ready for MPI: the pointers MPI gets, the host copies they may point into, and what
// to do once MPI is done. Moving it keeps the vectors' storage, so the pointers stay valid.
struct Prepared {
  Op op;
  int count = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  std::vector<char> host_send, host_recv;
  std::vector<CopyBack> after;
};

void say_staging_once() {
  static bool said = false;
  if (said) return;
  said = true;
  std::fprintf(stderr,
               "kformer comm: this MPI is not CUDA-aware: device buffers are staged through host memory "
               "(two extra copies per call; set KFORMER_MPI_CUDA_AWARE=1 if your MPI is CUDA-aware)\n");
}

Prepared prepare(const Op& op, int rank, int size) {
  Prepared p;
  p.op = op;
  p.count = mpi_count(op);
  const std::size_t chunk = op.count * dtype_size(op.type);
  const std::size_t whole = chunk * static_cast<std::size_t>(size);
  const auto* cs = static_cast<const char*>(op.send);
  auto* cr = static_cast<char*>(op.recv);
  // The region MPI reads from / writes to, and whether MPI_IN_PLACE applies.
  const void* src = op.send;
  std::size_t src_bytes = chunk;
  void* dst = op.recv;
  std::size_t dst_bytes = chunk;
  bool in_place = false;
  switch (op.kind) {
    case OpKind::allreduce: in_place = op.send == op.recv; break;
    case OpKind::reduce_scatter:
      src_bytes = whole;
      // MPI's in-place form reads recvbuf whole and leaves the result at its start.
      in_place = cr == cs + chunk * rank;
      if (in_place) {
        dst = const_cast<char*>(cs);
        dst_bytes = whole;
      }
      break;
    case OpKind::allgather:
      dst_bytes = whole;
      in_place = cs == cr + chunk * rank;
      break;
    case OpKind::broadcast: in_place = true; break;  // one buffer, read on the root
    case OpKind::send: dst = nullptr; break;
    case OpKind::recv: src = nullptr; break;
  }
  const bool stage = (src && is_device_pointer(src)) || (dst && is_device_pointer(dst));
  if (stage && !MpiComm::cuda_aware()) {
    say_staging_once();
    if (dst) {
      p.host_recv.resize(dst_bytes);
      if (in_place) copy_bytes(p.host_recv.data(), dst, dst_bytes);
      p.after.push_back({dst, p.host_recv.data(), dst_bytes});
      dst = p.host_recv.data();
    }
    if (src && !in_place) {
      p.host_send.resize(src_bytes);
      copy_bytes(p.host_send.data(), src, src_bytes);
      src = p.host_send.data();
    }
  }
  p.send = in_place && op.kind != OpKind::broadcast ? MPI_IN_PLACE : src;
  p.recv = dst;
  if (op.kind == OpKind::reduce_scatter && in_place && rank > 0) {
    // After any copy-back of the whole staged buffer, the result moves from the start to the slot.
    p.after.push_back({cr, cs, chunk});
  }
  return p;
}

// Posts `p` blocking (req == nullptr) or non-blocking; sends are synchronous under `rendezvous`.
void post(Prepared& p, MPI_Comm comm, MPI_Request* req, bool rendezvous) {
  const MPI_Datatype t = to_mpi(p.op.type);
  const MPI_Op r = to_mpi(p.op.reduce, p.op.type);
  switch (p.op.kind) {
    case OpKind::allreduce:
      check_mpi(req ? MPI_Iallreduce(p.send, p.recv, p.count, t, r, comm, req)
                : MPI_Allreduce(p.send, p.recv, p.count, t, r, comm),
            "MPI_Allreduce");
      break;
    case OpKind::reduce_scatter:
      check_mpi(req ? MPI_Ireduce_scatter_block(p.send, p.recv, p.count, t, r, comm, req)
                : MPI_Reduce_scatter_block(p.send, p.recv, p.count, t, r, comm),
            "MPI_Reduce_scatter_block");
      break;
    case OpKind::allgather:
      check_mpi(req ? MPI_Iallgather(p.send, p.count, t, p.recv, p.count, t, comm, req)
                : MPI_Allgather(p.send, p.count, t, p.recv, p.count, t, comm),
            "MPI_Allgather");
      break;
    case OpKind::broadcast:
      check_mpi(req ? MPI_Ibcast(p.recv, p.count, t, p.op.peer, comm, req)
                : MPI_Bcast(p.recv, p.count, t, p.op.peer, comm),
            "MPI_Bcast");
      break;
    case OpKind::send:
      if (rendezvous)
        check_mpi(req ? MPI_Issend(p.send, p.count, t, p.op.peer, 0, comm, req)
                  : MPI_Ssend(p.send, p.count, t, p.op.peer, 0, comm),
              "MPI_Ssend");
      else
        check_mpi(req ? MPI_Isend(p.send, p.count, t, p.op.peer, 0, comm, req)
                  : MPI_Send(p.send, p.count, t, p.op.peer, 0, comm),
              "MPI_Send");
      break;
    case OpKind::recv:
      check_mpi(req ? MPI_Irecv(p.recv, p.count, t, p.op.peer, 0, comm, req)
                : MPI_Recv(p.recv, p.count, t, p.op.peer, 0, comm, MPI_STATUS_IGNORE),
            "MPI_Recv");
      break;
  }
}

void finish(Prepared& p) {
  for (const CopyBack& c : p.after) copy_bytes(c.dst, c.src, c.bytes);
  p.after.clear();
}

class MpiRequest final : public Request::Impl {
 public:
  MpiRequest(std::vector<Prepared> calls, std::vector<MPI_Request> reqs)
      : calls_(std::move(calls)), reqs_(std::move(reqs)) {}
  ~MpiRequest() override {
    // Request only drops an Impl after completion or after a failed wait; a leftover MPI request
    // must not outlive its buffers, so cancel-free completion is forced here.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !done_) MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE);
  }
  bool test() override {
    int flag = 0;
    check_mpi(MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &flag, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (flag) complete();
    return flag != 0;
  }
  void wait() override {
    check_mpi(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    complete();
  }

 private:
  void complete() {
    done_ = true;
    for (Prepared& p : calls_) finish(p);
  }
  std::vector<Prepared> calls_;
  std::vector<MPI_Request> reqs_;
  bool done_ = false;
};

}  // namespace

std::vector<int> world_ranks_of(MPI_Comm comm) {
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(comm, &group), "MPI_Comm_group");
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
  int n = 0;
  MPI_Group_size(group, &n);
  std::vector<int> mine(n), out(n);
  for (int i = 0; i < n; ++i) mine[i] = i;
  const int rc = MPI_Group_translate_ranks(group, n, mine.data(), world, out.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  check_mpi(rc, "MPI_Group_translate_ranks");
  return out;
}

bool MpiComm::cuda_aware() {
  static const bool aware = [] {
    if (const char* env = std::getenv("KFORMER_MPI_CUDA_AWARE")) return std::strcmp(env, "0") != 0;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support() == 1;
#else
    return false;
#endif
  }();
  return aware;
}

MpiComm::MpiComm(MPI_Comm comm, bool owned, Kokkos::DefaultExecutionSpace exec, bool rendezvous)
    : MpiComm(MpiHandle(comm, owned), exec, rendezvous) {}

MpiComm::MpiComm(MpiHandle comm, Kokkos::DefaultExecutionSpace exec, bool rendezvous)
    : comm_(std::move(comm)), rank_(comm_.rank()), size_(comm_.size()), exec_(exec), rendezvous_(rendezvous) {}

std::unique_ptr<Communicator> MpiComm::split(int color, int key) {
  return std::make_unique<MpiComm>(comm_.split(color, key), exec_, rendezvous_);
}

void MpiComm::barrier() {
  exec_.fence();
  check_mpi(MPI_Barrier(comm_.get()), "MPI_Barrier");
}

void MpiComm::run(const Op& op) {
  exec_.fence();
  Prepared p = prepare(op, rank_, size_);
  post(p, comm_.get(), nullptr, rendezvous_);
  finish(p);
}

Request MpiComm::start(const Op& op) { return start_group({op}); }

Request MpiComm::start_group(const std::vector<Op>& ops) {
  exec_.fence();
  std::vector<Prepared> calls;
  calls.reserve(ops.size());
  std::vector<MPI_Request> reqs(ops.size(), MPI_REQUEST_NULL);
  // Receives are posted before sends, as MPI_Sendrecv does, so that a message finds its receive
  // already posted rather than waiting in the unexpected-message queue. Members of a group have
  // no order between them, and sends (receives) keep theirs among themselves.
  for (const bool receives : {true, false})
    for (const Op& op : ops) {
      if ((op.kind == OpKind::recv) != receives) continue;
      calls.push_back(prepare(op, rank_, size_));
      post(calls.back(), comm_.get(), &reqs[calls.size() - 1], rendezvous_);
    }
  return Request(std::make_unique<MpiRequest>(std::move(calls), std::move(reqs)));
}

}  // namespace kformer::comm
