// The `self` backend (one rank).
#include "self_comm.hpp"

#include <Kokkos_Core.hpp>

#include <stdexcept>
#include <string>

#include "device_memory.hpp"

namespace kformer::comm {
namespace {

std::size_t bytes_of(const Op& op) { return op.count * dtype_size(op.type); }

void check_same_size(std::size_t sent, std::size_t room) {
  if (sent != room)
    throw std::invalid_argument("comm self: a message of " + std::to_string(sent) +
                                " bytes met a receive of " + std::to_string(room) +
                                " bytes: post sends and receives with the same count and type");
}

// A message of one rank to itself still waiting for its other end: on one rank nobody else can
// post it, so waiting would hang for ever and is reported instead.
class SelfPending final : public Request::Impl {
 public:
  SelfPending(std::shared_ptr<SelfComm::Pending> p, const char* hang) : p_(std::move(p)), hang_(hang) {}
  bool test() override { return p_->done; }
  void wait() override {
    if (!p_->done) throw std::logic_error(hang_);
  }

 private:
  std::shared_ptr<SelfComm::Pending> p_;
  const char* hang_;
};

}  // namespace

std::unique_ptr<Communicator> SelfComm::split(int, int) { return std::make_unique<SelfComm>(rendezvous_); }

Request SelfComm::park(std::deque<std::shared_ptr<Pending>>& queue, const Op& op, const char* hang) {
  auto p = std::make_shared<Pending>();
  p->op = op;
  queue.push_back(p);
  return Request(std::make_unique<SelfPending>(std::move(p), hang));
}

Request SelfComm::deliver(const Op& send) {
  if (!waiting_.empty()) {
    auto r = waiting_.front();
    waiting_.pop_front();
    check_same_size(bytes_of(send), bytes_of(r->op));
    copy_bytes(r->op.recv, send.send, bytes_of(send));
    r->done = true;
    return Request();
  }
  if (rendezvous_) {  // the data stays in the sender's buffer until a receive takes it
    return park(unmatched_, send,
                "comm self (comm.strict): a send to rank 0 waits for a receive that is not posted: NCCL would "
                "deadlock here; post the receive first, or send and receive in one group");
  }
  // Buffered, as a small MPI_Send would be, so a blocking send to oneself returns.
  std::vector<char> msg(bytes_of(send));
  copy_bytes(msg.data(), send.send, msg.size());
  unclaimed_.push_back(std::move(msg));
  return Request();
}

Request SelfComm::receive(const Op& recv) {
  if (!unmatched_.empty()) {
    auto p = unmatched_.front();
    unmatched_.pop_front();
    check_same_size(bytes_of(p->op), bytes_of(recv));
    copy_bytes(recv.recv, p->op.send, bytes_of(recv));
    p->done = true;
    return Request();
  }
  if (!unclaimed_.empty()) {
    std::vector<char> msg = std::move(unclaimed_.front());
    unclaimed_.pop_front();
    check_same_size(msg.size(), bytes_of(recv));
    copy_bytes(recv.recv, msg.data(), msg.size());
    return Request();
  }
  return park(waiting_, recv,
              "comm self: waiting on a receive from rank 0 that no send matches; post the send (isend or send) "
              "before waiting on the receive");
}

void SelfComm::run(const Op& op) { start(op).wait(); }

Request SelfComm::start(const Op& op) {
  // Buffers may have been written by kernels still in flight.
  Kokkos::DefaultExecutionSpace().fence();
  switch (op.kind) {
    case OpKind::allreduce:
    case OpKind::reduce_scatter:
    case OpKind::allgather: copy_bytes(op.recv, op.send, bytes_of(op)); break;
    case OpKind::broadcast: break;
    case OpKind::send: return deliver(op);
    case OpKind::recv: return receive(op);
  }
  return Request();
}

Request SelfComm::start_group(const std::vector<Op>& ops) {
  // Receives first: then the group's own sends complete them, whatever order they were listed in.
  std::vector<Request> calls;
  for (const Op& op : ops)
    if (op.kind == OpKind::recv) calls.push_back(start(op));
  for (const Op& op : ops)
    if (op.kind == OpKind::send) calls.push_back(start(op));
  for (auto& r : calls) r.wait();
  return Request();
}

}  // namespace kformer::comm
