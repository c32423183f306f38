// Tracing decorator (see traced_comm.hpp).
#include "traced_comm.hpp"

#include <stdexcept>
#include <utility>

namespace kformer::comm {
namespace {

// Closes its record when the call is seen to complete, by wait() or by a test() that succeeds.
class TracedRequest final : public Request::Impl {
 public:
  TracedRequest(Request inner, std::shared_ptr<TraceLog> log, std::size_t index)
      : inner_(std::move(inner)), log_(std::move(log)), index_(index) {}
  bool test() override {
    if (!inner_.test()) return false;
    close();
    return true;
  }
  void wait() override {
    inner_.wait();
    close();
  }
  std::optional<DeviceSpan> device_span() const override { return inner_.device_span(); }

 private:
  void close() {
    log_->close(index_, TraceLog::now_us());
    if (const auto& span = inner_.device_span()) log_->set_device_span(index_, span->start_us, span->end_us);
  }

  Request inner_;
  std::shared_ptr<TraceLog> log_;
  std::size_t index_;
};

}  // namespace

TracedComm::TracedComm(std::unique_ptr<Communicator> inner, std::shared_ptr<TraceLog> log)
    : ForwardingCommunicator(std::move(inner)), log_(std::move(log)) {
  if (!log_) throw std::invalid_argument("TracedComm: no TraceLog given: pass std::make_shared<TraceLog>()");
  comm_id_ = log_->next_comm_id();
}

std::size_t TracedComm::open(const char* op, std::size_t bytes, bool blocking) {
  // Before the clock starts: kernels still queued that write this call's buffers are compute,
  // and the backend would wait for them inside the call (mpi's fence, nccl's stream order).
  inner_->fence_compute(blocking);
  TraceRecord r;
  r.op = op;
  r.bytes = bytes;
  r.group_size = size();
  r.comm_id = comm_id_;
  r.blocking = blocking;
  r.start_us = TraceLog::now_us();
  return log_->open(std::move(r));
}

std::unique_ptr<Communicator> TracedComm::split(int color, int key) {
  return std::make_unique<TracedComm>(inner_->split(color, key), log_);
}

void TracedComm::barrier() {
  const std::size_t i = open("barrier", 0, true);
  inner_->barrier();
  log_->close(i, TraceLog::now_us());
}

void TracedComm::run(const Op& op) {
  const std::size_t i = open(op_name(op.kind), op_bytes(op, size()), true);
  inner_->run(op);
  log_->close(i, TraceLog::now_us());
}

Request TracedComm::start(const Op& op) {
  const std::size_t i = open(op_name(op.kind), op_bytes(op, size()), false);
  Request r = inner_->start(op);
  return Request(std::make_unique<TracedRequest>(std::move(r), log_, i));
}

Request TracedComm::start_group(const std::vector<Op>& ops) {
  std::size_t bytes = 0;
  for (const Op& op : ops) bytes += op_bytes(op, size());
  const std::size_t i = open("group", bytes, false);
  Request r = inner_->start_group(ops);
  return Request(std::make_unique<TracedRequest>(std::move(r), log_, i));
}

}  // namespace kformer::comm
