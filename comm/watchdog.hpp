// The communication watchdog (comm.timeout_s): a call that has not completed after the timeout
// ends the job with one line naming the rank, the operation, its bytes and its group, instead of
// hanging until the batch system's walltime because a peer rank is stopped, hung or dead.
//
// Watchdog is the per-process part: the calls this rank is waiting in (begun by Watch, a scope
// guard), and a thread that looks every ~100 ms whether the oldest one is overdue. Time this
// process itself was suspended (SIGSTOP, a paused VM) does not count. The decorator that feeds it
// every call of a backend is WatchedComm (watched_comm.hpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "communicator.hpp"

namespace kformer::comm {

// The exit code of a job the watchdog ended (2: bad input, 3: non-finite training).
constexpr int kTimeoutExitCode = 4;

// The members of one communicator, described once when it is made.
struct GroupInfo {
  std::vector<int> world_ranks;  // in group rank order; empty when the backend cannot say
  int size = 1;
  std::string text;  // "group [0,1] (2 ranks)", or "tp group [0,1] (2 ranks)" once named
};
std::shared_ptr<const GroupInfo> describe_group(std::vector<int> world_ranks, int size, const std::string& name = "");

// What this rank waits for; recording one costs a few stores and no formatting.
struct Activity {
  const char* what = "";        // "allreduce", "send+recv", "barrier", "split", ...
  std::size_t bytes = 0;        // as op_bytes counts them
  const char* dtype = nullptr;  // nullptr: no payload
  int to = -1, from = -1;       // group ranks of the (first) destination / source, -1: none
  int more_peers = 0;           // messages of a group beyond the first send and the first recv
  bool from_root = false;       // broadcast: `from` is the root
  CallSite site;                // who made the call
  std::shared_ptr<const GroupInfo> group;
};
Activity activity_of(const Op& op, int group_size, std::shared_ptr<const GroupInfo> group);
Activity activity_of(const std::vector<Op>& ops, int group_size, std::shared_ptr<const GroupInfo> group);

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // Called once, on the watchdog's thread, with the line to report. The handler of make_world
  // (runtime.cpp) prints it, aborts the communicators (abort_communicators) and ends the job;
  // a test's handler may just record it.
  using Handler = std::function<void(Watchdog&, const std::string& line)>;

  // timeout_s > 0. `world_rank` names this rank in the line.
  Watchdog(double timeout_s, int world_rank, Handler on_timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  double timeout_s() const { return timeout_s_; }
  int world_rank() const { return world_rank_; }

  // Marks `activity` in flight on this rank for the guard's lifetime.
  class Watch {
   public:
    Watch(Watchdog& dog, Activity activity);
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    Watchdog& dog_;
    std::uint64_t id_;
  };

  // The line to report when the oldest activity in flight has lasted more than the timeout at
  // `now`; empty otherwise. The thread asks this; tests may ask it with a clock of their own.
  std::string overdue(Clock::time_point now) const;
  // Starts `activity` at `start` instead of now (tests). Returns the id end() takes.
  std::uint64_t begin(Activity activity, Clock::time_point start);
  void end(std::uint64_t id);
  // Moves the start of everything in flight later by `by`: time this process was suspended
  // does not count against its peers (the thread does this when it wakes a second late).
  void postpone(Clock::duration by);

  // Backends whose blocked calls must be cut short before the job can end (NCCL): the handler
  // calls Communicator::abort_calls() on each.
  void enlist(Communicator* comm);
  void discharge(Communicator* comm);
  void abort_communicators();

 private:
  struct Entry {
    std::uint64_t id;
    Clock::time_point start;
    Activity activity;
  };
  void loop();

  const double timeout_s_;
  const int world_rank_;
  Handler on_timeout_;

  mutable std::mutex mutex_;  // guards in_flight_ and next_id_
  std::vector<Entry> in_flight_;
  std::uint64_t next_id_ = 0;

  std::mutex comms_mutex_;
  std::vector<Communicator*> comms_;

  std::mutex thread_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kformer::comm
