// The emulated communication stream (see stream_queue.hpp).
#include "stream_queue.hpp"

#include <exception>
#include <utility>

namespace kformer::comm {

struct StreamQueue::Entry {
  Communicator* backend = nullptr;
  std::vector<Op> ops;
  bool group = false;
  bool posted = false, done = false;
  Request request;
  std::exception_ptr error;  // a failed call: thrown to whoever waits on it
};

namespace {

class QueuedRequest final : public Request::Impl {
 public:
  QueuedRequest(std::shared_ptr<StreamQueue> q, std::shared_ptr<StreamQueue::Entry> e)
      : queue_(std::move(q)), entry_(std::move(e)) {}
  bool test() override;
  void wait() override { queue_->wait_for(*entry_); }
  std::optional<DeviceSpan> device_span() const override { return entry_->request.device_span(); }

 private:
  std::shared_ptr<StreamQueue> queue_;
  std::shared_ptr<StreamQueue::Entry> entry_;
};

}  // namespace

Request StreamQueue::enqueue(Communicator& backend, std::vector<Op> ops, bool group) {
  auto e = std::make_shared<Entry>();
  e->backend = &backend;
  e->ops = std::move(ops);
  e->group = group;
  queue_.push_back(e);
  progress();
  return Request(std::make_unique<QueuedRequest>(shared_from_this(), std::move(e)));
}

void StreamQueue::post_head() {
  Entry& e = *queue_.front();
  if (e.posted) return;
  e.posted = true;
  try {
    e.request = e.group ? e.backend->start_group(e.ops) : e.backend->start(e.ops.front());
  } catch (...) {
    e.error = std::current_exception();
    e.done = true;
  }
}

void StreamQueue::retire_head() {
  queue_.front()->done = true;
  queue_.pop_front();
}

void StreamQueue::progress() {
  while (!queue_.empty()) {
    post_head();
    Entry& head = *queue_.front();
    if (!head.done) {
      try {
        if (!head.request.done() && !head.request.test()) return;
      } catch (...) {
        head.error = std::current_exception();
      }
    }
    retire_head();
  }
}

void StreamQueue::wait_for(Entry& e) {
  while (!e.done) {
    post_head();
    Entry& head = *queue_.front();
    if (!head.done) {
      try {
        head.request.wait();
      } catch (...) {
        head.error = std::current_exception();
      }
    }
    retire_head();
  }
  if (e.error) {
    std::exception_ptr error = std::move(e.error);
    e.error = nullptr;
    std::rethrow_exception(error);
  }
}

void StreamQueue::drain() {
  if (queue_.empty()) return;
  std::shared_ptr<Entry> last = queue_.back();
  wait_for(*last);
}

void StreamQueue::forget(const Communicator& backend) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->backend == &backend && !(*it)->posted) {
      (*it)->done = true;
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
}

bool QueuedRequest::test() {
  queue_->progress();
  if (entry_->done && entry_->error) queue_->wait_for(*entry_);  // throws the call's error
  return entry_->done;
}

}  // namespace kformer::comm
