// The `self` backend: one rank, every collective is a copy. Lets the whole app run without MPI.
// Messages to oneself are delivered through a mailbox in posting order, as MPI would deliver
// them, so pipeline code that sends to its own stage works on one rank too.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "communicator.hpp"

namespace kformer::comm {

class SelfComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override {}
  void run(const Op& op) override;
  Request start(const Op& op) override;
  Request start_group(const std::vector<Op>& ops) override;

  struct PendingRecv {
    Op op;
    bool done = false;
  };

 private:
  void deliver(const Op& send);
  Request receive(const Op& recv);

  std::deque<std::vector<char>> unclaimed_;           // sent, not yet received
  std::deque<std::shared_ptr<PendingRecv>> waiting_;  // received, not yet sent
};

}  // namespace kformer::comm
