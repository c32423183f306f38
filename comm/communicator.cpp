// The typed calls of Communicator and the checks every backend shares, so that a wrong root or
// an overlapping buffer fails the same way, with the same message, on self, MPI and NCCL.
#include "communicator.hpp"

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kformer::comm {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return sizeof(float);
    case DType::f64: return sizeof(double);
    case DType::i32: return sizeof(std::int32_t);
    case DType::bf16: return 2;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::bf16: return "bfloat16";
  }
  return "?";
}

void Communicator::fence_compute(bool /*blocking*/) { Kokkos::DefaultExecutionSpace().fence(); }

const char* op_name(OpKind k) {
  switch (k) {
    case OpKind::allreduce: return "allreduce";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::allgather: return "allgather";
    case OpKind::broadcast: return "broadcast";
    case OpKind::send: return "send";
    case OpKind::recv: return "recv";
  }
  return "?";
}

std::string describe(const CallSite& site) {
  if (!site.file) return "";
  std::string file = site.file;
  // The last two path components: "miniapp/trainer.cpp", not the build machine's absolute path.
  std::size_t cut = file.rfind('/');
  if (cut != std::string::npos && cut > 0) cut = file.rfind('/', cut - 1);
  if (cut != std::string::npos) file = file.substr(cut + 1);
  std::string s = file + ":" + std::to_string(site.line);
  if (site.function && *site.function) {
    // A template's name comes with its arguments ("f<double, Kokkos::View<...> >"): the name is
    // enough to find the caller, and keeps the line short.
    std::string fn = site.function;
    fn = fn.substr(0, fn.find('<'));
    s += " in " + fn;
  }
  return s;
}

std::size_t op_bytes(const Op& op, int group_size) {
  const std::size_t b = op.count * dtype_size(op.type);
  const bool per_rank = op.kind == OpKind::reduce_scatter || op.kind == OpKind::allgather;
  return per_rank ? b * static_cast<std::size_t>(group_size) : b;
}

namespace {

[[noreturn]] void bad(const Op& op, const std::string& why) {
  throw std::invalid_argument(std::string("comm ") + op_name(op.kind) + ": " + why);
}

bool overlap(const void* a, std::size_t na, const void* b, std::size_t nb) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + nb && pb < pa + na;
}

}  // namespace

void Communicator::validate(const Op& op) const {
  const int n = size(), me = rank();
  const std::size_t chunk = op.count * dtype_size(op.type);
  const std::size_t whole = chunk * static_cast<std::size_t>(n);
  const bool needs_send = op.kind != OpKind::broadcast && op.kind != OpKind::recv;
  const bool needs_recv = op.kind != OpKind::send;
  if (op.count > 0 && needs_send && !op.send) bad(op, "send buffer is null: pass the data to send");
  if (op.count > 0 && needs_recv && !op.recv) bad(op, "receive buffer is null: pass where the result goes");
  switch (op.kind) {
    case OpKind::allreduce:
      if (op.send != op.recv && overlap(op.send, chunk, op.recv, chunk))
        bad(op, "send and recv overlap without being equal: use one buffer (in place) or two disjoint ones");
      break;
    case OpKind::reduce_scatter: {
      const auto* slot = static_cast<const char*>(op.send) + chunk * me;
      if (op.recv != slot && overlap(op.send, whole, op.recv, chunk))
        bad(op, "recv overlaps send but is not this rank's slot send + rank*count (the in-place form)");
      break;
    }
    case OpKind::allgather: {
      const auto* slot = static_cast<const char*>(op.recv) + chunk * me;
      if (op.send != slot && overlap(op.send, chunk, op.recv, whole))
        bad(op, "send overlaps recv but is not this rank's slot recv + rank*count (the in-place form)");
      break;
    }
    case OpKind::broadcast:
      if (op.peer < 0 || op.peer >= n)
        bad(op, "root " + std::to_string(op.peer) + " is not a rank of this " + std::to_string(n) +
                    "-rank communicator: pick a root in [0, " + std::to_string(n) + ")");
      break;
    case OpKind::send:
    case OpKind::recv:
      if (op.peer < 0 || op.peer >= n)
        bad(op, "peer " + std::to_string(op.peer) + " is not a rank of this " + std::to_string(n) +
                    "-rank communicator: pick a peer in [0, " + std::to_string(n) + ")");
      break;
  }
}

// Zero-length calls complete here, on every backend alike: every rank of a collective passes
// the same count, and both ends of a message agree on it, so skipping them is symmetric.
void Communicator::blocking(const Op& op) {
  validate(op);
  if (op.count > 0) run(op);
}

Request Communicator::nonblocking(const Op& op) {
  validate(op);
  return op.count > 0 ? start(op) : Request();
}

void Communicator::allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op, CallSite at) {
  blocking({OpKind::allreduce, send, recv, count, type, op, 0, at});
}
Request Communicator::iallreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op, CallSite at) {
  return nonblocking({OpKind::allreduce, send, recv, count, type, op, 0, at});
}
void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                  ReduceOp op, CallSite at) {
  blocking({OpKind::reduce_scatter, send, recv, recv_count, type, op, 0, at});
}
Request Communicator::ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                      ReduceOp op, CallSite at) {
  return nonblocking({OpKind::reduce_scatter, send, recv, recv_count, type, op, 0, at});
}
void Communicator::allgather(const void* send, void* recv, std::size_t send_count, DType type, CallSite at) {
  blocking({OpKind::allgather, send, recv, send_count, type, ReduceOp::sum, 0, at});
}
Request Communicator::iallgather(const void* send, void* recv, std::size_t send_count, DType type, CallSite at) {
  return nonblocking({OpKind::allgather, send, recv, send_count, type, ReduceOp::sum, 0, at});
}
void Communicator::broadcast(void* buf, std::size_t count, DType type, int root, CallSite at) {
  blocking({OpKind::broadcast, nullptr, buf, count, type, ReduceOp::sum, root, at});
}
Request Communicator::ibroadcast(void* buf, std::size_t count, DType type, int root, CallSite at) {
  return nonblocking({OpKind::broadcast, nullptr, buf, count, type, ReduceOp::sum, root, at});
}
void Communicator::send(const void* buf, std::size_t count, DType type, int peer, CallSite at) {
  blocking(Op::send_to(buf, count, type, peer, at));
}
Request Communicator::isend(const void* buf, std::size_t count, DType type, int peer, CallSite at) {
  return nonblocking(Op::send_to(buf, count, type, peer, at));
}
void Communicator::recv(void* buf, std::size_t count, DType type, int peer, CallSite at) {
  blocking(Op::recv_from(buf, count, type, peer, at));
}
Request Communicator::irecv(void* buf, std::size_t count, DType type, int peer, CallSite at) {
  return nonblocking(Op::recv_from(buf, count, type, peer, at));
}

void Communicator::group(const std::vector<Op>& ops, CallSite at) { igroup(ops, at).wait(); }

Request Communicator::igroup(const std::vector<Op>& ops, CallSite at) {
  std::vector<Op> live;
  live.reserve(ops.size());
  for (const Op& op : ops) {
    if (op.kind != OpKind::send && op.kind != OpKind::recv)
      bad(op, "only send and recv can be grouped: issue collectives as calls of their own");
    validate(op);
    if (op.count == 0) continue;
    live.push_back(op);
    if (!live.back().site.file) live.back().site = at;  // an Op built without a site: the group's
  }
  return live.empty() ? Request() : start_group(live);
}

}  // namespace kformer::comm
