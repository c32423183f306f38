// The handle of a non-blocking communication call: wait() blocks until the call has completed
// (its buffers may be reused / read), test() asks without blocking. Backends and decorators put
// their own completion logic behind Request::Impl.
#pragma once

#include <memory>
#include <optional>

namespace kformer::comm {

// When a call ran where the backend timed it on the device (nccl: CUDA events on its stream), in
// microseconds on the host's steady clock (TraceLog::now_us's). A non-blocking call's host span
// runs from its post to the moment it was seen complete, and on a GPU the post may precede the
// call by all the compute still queued: this span is the communication alone.
struct DeviceSpan {
  double start_us = 0.0;
  double end_us = 0.0;
};

class Request {
 public:
  // What a backend (or decorator) implements. test() and wait() are only called until the first
  // one reports completion; after that the Request forgets the Impl.
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual bool test() = 0;
    virtual void wait() = 0;
    // Asked once, after completion. Backends that progress on the host (self, mpi) have none.
    virtual std::optional<DeviceSpan> device_span() const { return std::nullopt; }
  };

  Request() = default;  // an already completed call (zero-length, one rank, ...)
  explicit Request(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  // A dropped handle still completes its call: otherwise the library would write into buffers
  // the caller may already have freed.
  ~Request();

  void wait();
  bool test();
  bool done() const { return !impl_; }
  // After completion seen by wait() or test(): the backend's device span, if it measured one.
  const std::optional<DeviceSpan>& device_span() const { return span_; }

 private:
  void complete_quietly() noexcept;
  std::unique_ptr<Impl> impl_;
  std::optional<DeviceSpan> span_;
};

// Waits for every request in order (each one's error is thrown from its own wait).
template <class Requests>
void wait_all(Requests& requests) {
  for (auto& r : requests) r.wait();
}

}  // namespace kformer::comm
