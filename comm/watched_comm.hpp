// WatchedComm, the decorator of the communication watchdog (watchdog.hpp, comm.timeout_s): it
// records every call of a backend with the Watchdog, blocking calls, barrier and split for their
// whole duration, non-blocking ones from the moment the caller waits on them (a Request that is
// merely posted, or polled with test(), may legitimately stay open while the caller computes).
// It sits directly around the backend, under emulation and tracing, so that it times the real
// network, and every communicator split from it shares the world's Watchdog.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "forwarding_comm.hpp"
#include "watchdog.hpp"

namespace kformer::comm {

// The decorator (see the top of this file). Splits are watched by the same Watchdog.
class WatchedComm final : public ForwardingCommunicator {
 public:
  WatchedComm(std::unique_ptr<Communicator> inner, std::shared_ptr<Watchdog> dog);
  ~WatchedComm() override;

  std::vector<int> world_ranks() const override { return group_->world_ranks; }
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override;
  void run(const Op& op) override;
  Request start(const Op& op) override;
  Request start_group(const std::vector<Op>& ops) override;
  void set_name(const std::string& name) override { group_ = describe_group(group_->world_ranks, group_->size, name); }

  Watchdog& watchdog() { return *dog_; }
  const GroupInfo& group() const { return *group_; }

 private:
  std::shared_ptr<Watchdog> dog_;
  std::shared_ptr<const GroupInfo> group_;
};

// `comm` (the world, or any communicator) watched by a new Watchdog of `timeout_s` that calls
// `on_timeout`; the rank in the line is `comm`'s world rank.
std::unique_ptr<Communicator> watch(std::unique_ptr<Communicator> comm, double timeout_s,
                                    Watchdog::Handler on_timeout);

}  // namespace kformer::comm
