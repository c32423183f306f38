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

class SelfRecv final : public Request::Impl {
 public:
  explicit SelfRecv(std::shared_ptr<SelfComm::PendingRecv> p) : p_(std::move(p)) {}
  bool test() override { return p_->done; }
  void wait() override {
    // One rank has nobody else to send: waiting would hang for ever.
    if (!p_->done)
      throw std::logic_error("comm self: waiting on a receive from rank 0 that no send matches; "
                             "post the send (isend or send) before waiting on the receive");
  }

 private:
  std::shared_ptr<SelfComm::PendingRecv> p_;
};

}  // namespace

std::unique_ptr<Communicator> SelfComm::split(int, int) { return std::make_unique<SelfComm>(); }

void SelfComm::deliver(const Op& send) {
  if (!waiting_.empty()) {
    auto r = waiting_.front();
    waiting_.pop_front();
    check_same_size(bytes_of(send), bytes_of(r->op));
    copy_bytes(r->op.recv, send.send, bytes_of(send));
    r->done = true;
    return;
  }
  // Buffered, as a small MPI_Send would be, so a blocking send to oneself returns.
  std::vector<char> msg(bytes_of(send));
  copy_bytes(msg.data(), send.send, msg.size());
  unclaimed_.push_back(std::move(msg));
}

Request SelfComm::receive(const Op& recv) {
  if (!unclaimed_.empty()) {
    std::vector<char> msg = std::move(unclaimed_.front());
    unclaimed_.pop_front();
    check_same_size(msg.size(), bytes_of(recv));
    copy_bytes(recv.recv, msg.data(), msg.size());
    return Request();
  }
  auto r = std::make_shared<PendingRecv>();
  r->op = recv;
  waiting_.push_back(r);
  return Request(std::make_unique<SelfRecv>(r));
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
    case OpKind::send: deliver(op); break;
    case OpKind::recv: return receive(op);
  }
  return Request();
}

Request SelfComm::start_group(const std::vector<Op>& ops) {
  // Receives first: then the group's own sends complete them, whatever order they were listed in.
  std::vector<Request> recvs;
  for (const Op& op : ops)
    if (op.kind == OpKind::recv) recvs.push_back(start(op));
  for (const Op& op : ops)
    if (op.kind == OpKind::send) start(op);
  for (auto& r : recvs) r.wait();
  return Request();
}

}  // namespace kformer::comm
