// comm.strict: NCCL's contract enforced on any backend, so that the CPU tests catch what would
// fail on the first GPU job. Two rules, both NCCL's:
//   1. every buffer lies inside a live device allocation (a View of
//      Kokkos::DefaultExecutionSpace::memory_space; where that space is the host's, one made by
//      comm::device_view, device_view.hpp): a stack scalar, a std::vector, and in a CPU build a
//      HostSpace View or a host mirror too, are refused with one line naming the call and its caller;
//   2. calls run in issue order on one stream per process (stream_queue.hpp) and a send completes
//      only when its receive is posted (the backend's rendezvous mode, make_world sets it), unless
//      both are in one group: an exchange that would deadlock under NCCL deadlocks here too, and
//      the watchdog (comm.timeout_s) ends it with a line naming the ranks.
// The decorator sits outermost (make_world), so it sees every call as its caller made it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "forwarding_comm.hpp"
#include "stream_queue.hpp"

namespace kformer::comm {

class StrictComm final : public ForwardingCommunicator {
 public:
  // Installs the AllocationRegistry if nobody has (needs Kokkos initialised).
  explicit StrictComm(std::unique_ptr<Communicator> inner,
                      std::shared_ptr<StreamQueue> stream = std::make_shared<StreamQueue>());
  ~StrictComm() override;

  std::string backend() const override { return "strict(" + inner_->backend() + ")"; }
  void set_name(const std::string& name) override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override;
  void run(const Op& op) override;
  Request start(const Op& op) override;
  Request start_group(const std::vector<Op>& ops) override;

 private:
  void check_buffers(const Op& op) const;

  std::shared_ptr<StreamQueue> stream_;
  std::string name_;  // the group's axis, for the buffer rule's line
};

}  // namespace kformer::comm
