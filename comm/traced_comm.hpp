// Tracing around any backend: every call is timed and appended to a TraceLog shared by the
// world communicator and everything split from it, so one rank has one timeline. Put it
// outermost (around the emulation) so the recorded time is what the caller waited.
// The compute queued before a call is fenced before its record opens (fence_compute), so a
// record never contains kernels that were still running; a non-blocking call that the backend
// timed on the device (nccl) also gets that device span.
#pragma once

#include <memory>

#include "forwarding_comm.hpp"
#include "trace_log.hpp"

namespace kformer::comm {

class TracedComm final : public ForwardingCommunicator {
 public:
  TracedComm(std::unique_ptr<Communicator> inner, std::shared_ptr<TraceLog> log);

  std::string backend() const override { return "traced(" + inner_->backend() + ")"; }
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override;
  void run(const Op& op) override;
  Request start(const Op& op) override;
  Request start_group(const std::vector<Op>& ops) override;

  TraceLog& log() { return *log_; }
  const std::shared_ptr<TraceLog>& shared_log() const { return log_; }
  int comm_id() const { return comm_id_; }

 private:
  // Fences the compute queued so far (fence_compute), then opens the call's record.
  std::size_t open(const char* op, std::size_t bytes, bool blocking);

  std::shared_ptr<TraceLog> log_;
  int comm_id_;
};

}  // namespace kformer::comm
