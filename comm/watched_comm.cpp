// The watchdog's decorator (see watched_comm.hpp).
#include "watched_comm.hpp"

#include <stdexcept>
#include <utility>

namespace kformer::comm {

namespace {

// Times the wait, not the flight: a posted request may stay open while its caller computes.
class WatchedRequest final : public Request::Impl {
 public:
  WatchedRequest(Request inner, std::shared_ptr<Watchdog> dog, Activity activity)
      : inner_(std::move(inner)), dog_(std::move(dog)), activity_(std::move(activity)) {}
  bool test() override { return inner_.test(); }
  void wait() override {
    Watchdog::Watch watch(*dog_, activity_);
    inner_.wait();
  }
  std::optional<DeviceSpan> device_span() const override { return inner_.device_span(); }

 private:
  Request inner_;
  std::shared_ptr<Watchdog> dog_;
  Activity activity_;
};

std::shared_ptr<const GroupInfo> group_of(const Communicator& c, int my_world_rank) {
  std::vector<int> ranks = c.world_ranks();
  if (ranks.empty() && c.size() == 1) ranks = {my_world_rank};
  return describe_group(std::move(ranks), c.size());
}

Activity plain(const char* what, std::shared_ptr<const GroupInfo> group) {
  Activity a;
  a.what = what;
  a.group = std::move(group);
  return a;
}

}  // namespace

WatchedComm::WatchedComm(std::unique_ptr<Communicator> inner, std::shared_ptr<Watchdog> dog)
    : ForwardingCommunicator(std::move(inner)), dog_(std::move(dog)) {
  if (!inner_ || !dog_) throw std::invalid_argument("WatchedComm: needs a communicator and a Watchdog");
  group_ = group_of(*inner_, dog_->world_rank());
  dog_->enlist(inner_.get());
}

WatchedComm::~WatchedComm() { dog_->discharge(inner_.get()); }

std::unique_ptr<Communicator> WatchedComm::split(int color, int key) {
  std::unique_ptr<Communicator> sub;
  {
    Watchdog::Watch watch(*dog_, plain("split", group_));
    sub = inner_->split(color, key);
  }
  return std::make_unique<WatchedComm>(std::move(sub), dog_);
}

void WatchedComm::barrier() {
  Watchdog::Watch watch(*dog_, plain("barrier", group_));
  inner_->barrier();
}

void WatchedComm::run(const Op& op) {
  Watchdog::Watch watch(*dog_, activity_of(op, size(), group_));
  inner_->run(op);
}

Request WatchedComm::start(const Op& op) {
  Request r = inner_->start(op);
  if (r.done()) return r;
  return Request(std::make_unique<WatchedRequest>(std::move(r), dog_, activity_of(op, size(), group_)));
}

Request WatchedComm::start_group(const std::vector<Op>& ops) {
  Request r = inner_->start_group(ops);
  if (r.done()) return r;
  return Request(std::make_unique<WatchedRequest>(std::move(r), dog_, activity_of(ops, size(), group_)));
}

std::unique_ptr<Communicator> watch(std::unique_ptr<Communicator> comm, double timeout_s,
                                    Watchdog::Handler on_timeout) {
  const std::vector<int> ranks = comm->world_ranks();
  const int me = comm->rank();
  const int world_rank = static_cast<int>(ranks.size()) == comm->size() ? ranks[me] : me;
  auto dog = std::make_shared<Watchdog>(timeout_s, world_rank, std::move(on_timeout));
  return std::make_unique<WatchedComm>(std::move(comm), std::move(dog));
}

}  // namespace kformer::comm
