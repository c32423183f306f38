// One communication stream, as NCCL runs it, emulated for comm.strict on any backend: every
// call a process makes is started only after all the calls it made before have completed
// (a CUDA stream runs its kernels in order), except that the members of one group start together.
// Calls are queued, not posted, until their turn; the queue moves when the caller tests or waits
// on any of its requests, or makes another call. With rendezvous sends (a send completes only once
// its receive is posted) this reproduces NCCL's deadlocks on MPI: two ranks that each send, then
// receive, outside one group, wait for ever, and the watchdog names them.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "communicator.hpp"

namespace kformer::comm {

class StreamQueue : public std::enable_shared_from_this<StreamQueue> {
 public:
  struct Entry;

  // Queues `ops` (one call, or one group when `group`) for `backend`; the Request completes when
  // the call has, in queue order.
  Request enqueue(Communicator& backend, std::vector<Op> ops, bool group);
  // Completes every queued call (before a barrier or a split, which the host blocks on while a
  // GPU would go on running the stream).
  void drain();
  // Drops the calls of `backend` not yet posted (its communicator is being destroyed).
  void forget(const Communicator& backend);

  // Moves the queue without blocking: posts the head, retires it when done, repeats.
  void progress();
  // Blocks until `e` has completed, posting and waiting every call before it.
  void wait_for(Entry& e);

 private:
  void post_head();
  void retire_head();
  std::deque<std::shared_ptr<Entry>> queue_;
};

}  // namespace kformer::comm
