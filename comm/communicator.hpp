// The one interface through which every part of kformer communicates. Backends (self, mpi,
// nccl) implement a small type-erased core (run / start / start_group on an Op, split,
// barrier); decorators (network emulation, tracing, comm.strict, the watchdog) wrap any backend
// by overriding the same core, so each of them sees every call in one place (they derive from
// ForwardingCommunicator, forwarding_comm.hpp, which passes on the rest). The typed calls below
// are thin non-virtual wrappers that validate and build the Op; views.hpp adds Kokkos::View forms.
//
// Buffer rules, the same for every backend (they are NCCL's, which is the strictest):
//   allreduce       send[count] -> recv[count]; in place when send == recv.
//   reduce_scatter  send[count * size] -> recv[count]; in place when recv == send + rank*count.
//   allgather       send[count] -> recv[count * size]; in place when send == recv + rank*count.
//   broadcast       buf[count] on every rank, from `root`.
//   send / recv     messages between one pair are matched in the order they were posted (no
//                   tags: NCCL has none, and a tag that only MPI honoured would make code that
//                   runs on MPI hang on NCCL).
// A blocking call returns when its buffers hold the result and may be reused; a non-blocking
// call returns a Request, and the buffers belong to the library until it completes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "request.hpp"

namespace kformer::comm {

// bf16: bfloat16, 16 bits (kernels/bf16.hpp); sums add in fp32 and round once per combine.
enum class DType { f32, f64, i32, bf16 };
enum class ReduceOp { sum, max };
enum class OpKind { allreduce, reduce_scatter, allgather, broadcast, send, recv };

std::size_t dtype_size(DType t);
const char* dtype_name(DType t);
const char* op_name(OpKind k);

// Where a communication call was made, for the lines that report a broken rule or a stuck call
// ("miniapp/trainer.cpp:150 in iterate"). Every typed call takes it as a defaulted last argument,
// so the call site is its caller's without anyone spelling it (GCC, Clang and nvcc have these
// builtins; C++20's std::source_location is the same idea).
//
// A site may also say what its call carries, which no backend reads: predict costs a
// tensor-parallel call by it (predict/chunk_work.hpp), as other software runs the same call.
enum class Payload {
  other,           // statistics, parameters or their gradients
  activations,     // activations or their gradients, outside the two cases below
  input_gradient,  // a column-parallel layer's input gradient, reduced after its backward GEMMs
  weight_input,    // sequence parallelism: a column-parallel layer's input gathered for its weight gradient
  message,         // a pipeline message split over TP (BlockDims::splits_messages), gathered on arrival
};
struct CallSite {
  const char* file = nullptr;
  int line = 0;
  const char* function = nullptr;
  Payload payload = Payload::other;
  static CallSite here(const char* file = __builtin_FILE(), int line = __builtin_LINE(),
                       const char* function = __builtin_FUNCTION()) {
    return {file, line, function};
  }
  // here(), carrying `what`.
  static CallSite carrying(Payload what, const char* file = __builtin_FILE(), int line = __builtin_LINE(),
                           const char* function = __builtin_FUNCTION()) {
    return {file, line, function, what};
  }
};
// "dir/file.cpp:LINE in FUNCTION" (the last two path components), or "" when unknown.
std::string describe(const CallSite& site);

// One communication call. `count` follows the rules above: elements per rank for
// reduce_scatter's result and allgather's contribution, the whole buffer otherwise.
struct Op {
  OpKind kind = OpKind::allreduce;
  const void* send = nullptr;  // allreduce, reduce_scatter, allgather, send
  void* recv = nullptr;        // allreduce, reduce_scatter, allgather, broadcast, recv
  std::size_t count = 0;
  DType type = DType::f32;
  ReduceOp reduce = ReduceOp::sum;
  int peer = 0;  // broadcast: the root; send/recv: the other rank
  CallSite site;  // who made the call

  static Op send_to(const void* buf, std::size_t count, DType type, int peer, CallSite at = CallSite::here()) {
    return {OpKind::send, buf, nullptr, count, type, ReduceOp::sum, peer, at};
  }
  static Op recv_from(void* buf, std::size_t count, DType type, int peer, CallSite at = CallSite::here()) {
    return {OpKind::recv, nullptr, buf, count, type, ReduceOp::sum, peer, at};
  }
};

// The "size" nccl-tests reports for a call on a group of `group_size` ranks: the larger of the
// send and receive buffers (allgather's output, reduce_scatter's input), the message for p2p.
std::size_t op_bytes(const Op& op, int group_size);

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "self", "mpi", "nccl", or a decorator's name around its backend's: "traced(mpi)".
  virtual std::string backend() const = 0;

  // Ranks with the same color (>= 0) form a new communicator, ordered by key, then by old rank.
  // Collective over this communicator. The result has the same backend and decorators.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  virtual void barrier() = 0;

  // The world rank of each member, in rank order, where the backend knows them without
  // communicating (mpi and nccl ask MPI's groups); empty where it does not. The watchdog names
  // groups and peers with them.
  virtual std::vector<int> world_ranks() const { return {}; }
  // Called from the watchdog's thread as the job is being ended: cut short the calls blocked on
  // this communicator (nccl: ncclCommAbort, so its kernels stop before the process goes). The
  // communicator is unusable afterwards. Default: nothing (MPI_Abort ends MPI's own calls).
  virtual void abort_calls() noexcept {}
  // Names this group's axis ("tp", "dp", "pp") for the watchdog's line; decorators pass it on.
  virtual void set_name(const std::string& /*name*/) {}
  // Waits on the host for the compute queued so far, where a call posted now would make the host
  // wait for it anyway: every call of a backend that progresses on the host (self, mpi: the
  // default fences Kokkos::DefaultExecutionSpace), only the blocking calls of nccl (its
  // non-blocking calls wait for the compute on the device, through an event). Decorators that time
  // a call (tracing, emulation) call it first, so that their time is communication only and never
  // queued kernels; backends still fence for themselves, and fencing an idle space costs nothing.
  // Decorators pass it on to their backend.
  virtual void fence_compute(bool blocking);

  // --- The type-erased core. Ops reaching it are validated and non-empty. -------------------
  virtual void run(const Op& op) = 0;
  virtual Request start(const Op& op) = 0;
  // A batch of sends and receives that progress together (pipeline exchange, a ring step): no
  // ordering between its members, so a ring of send+recv pairs cannot deadlock.
  virtual Request start_group(const std::vector<Op>& ops) = 0;

  // --- Typed calls --------------------------------------------------------------------------
  void allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op, CallSite at = CallSite::here());
  Request iallreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op, CallSite at = CallSite::here());
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type, ReduceOp op, CallSite at = CallSite::here());
  Request ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type, ReduceOp op, CallSite at = CallSite::here());
  void allgather(const void* send, void* recv, std::size_t send_count, DType type, CallSite at = CallSite::here());
  Request iallgather(const void* send, void* recv, std::size_t send_count, DType type, CallSite at = CallSite::here());
  void broadcast(void* buf, std::size_t count, DType type, int root, CallSite at = CallSite::here());
  Request ibroadcast(void* buf, std::size_t count, DType type, int root, CallSite at = CallSite::here());
  void send(const void* buf, std::size_t count, DType type, int peer, CallSite at = CallSite::here());
  Request isend(const void* buf, std::size_t count, DType type, int peer, CallSite at = CallSite::here());
  void recv(void* buf, std::size_t count, DType type, int peer, CallSite at = CallSite::here());
  Request irecv(void* buf, std::size_t count, DType type, int peer, CallSite at = CallSite::here());
  void group(const std::vector<Op>& ops, CallSite at = CallSite::here());
  Request igroup(const std::vector<Op>& ops, CallSite at = CallSite::here());

  // Checks peers, roots and buffer overlap; throws std::invalid_argument naming the fix.
  void validate(const Op& op) const;

 protected:
  Communicator() = default;

 private:
  void blocking(const Op& op);
  Request nonblocking(const Op& op);
};

}  // namespace kformer::comm
