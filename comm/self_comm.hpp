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
  // `rendezvous` (comm.strict): a send completes only once a receive takes it, as NCCL's may,
  // instead of waiting in the mailbox; on one rank an unmatched send is then a deadlock, reported.
  explicit SelfComm(bool rendezvous = false) : rendezvous_(rendezvous) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override {}
  void run(const Op& op) override;
  Request start(const Op& op) override;
  Request start_group(const std::vector<Op>& ops) override;

  // A receive waiting for its send, or (rendezvous) a send waiting for its receive.
  struct Pending {
    Op op;
    bool done = false;
  };

 private:
  Request deliver(const Op& send);
  Request receive(const Op& recv);
  // Queues `op` until its other end is posted; its request's wait throws `hang` if it never is.
  Request park(std::deque<std::shared_ptr<Pending>>& queue, const Op& op, const char* hang);

  bool rendezvous_ = false;
  std::deque<std::shared_ptr<Pending>> unmatched_;  // rendezvous sends not yet received

  std::deque<std::vector<char>> unclaimed_;           // sent, not yet received
  std::deque<std::shared_ptr<Pending>> waiting_;  // received, not yet sent
};

}  // namespace kformer::comm
