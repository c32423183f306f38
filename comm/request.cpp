// Completion bookkeeping shared by every backend's requests.
#include "request.hpp"

namespace kformer::comm {

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    complete_quietly();
    impl_ = std::move(other.impl_);
    span_ = other.span_;
  }
  return *this;
}

Request::~Request() { complete_quietly(); }

void Request::wait() {
  if (!impl_) return;
  // Taken out first: a wait that throws leaves nothing to wait for again in the destructor.
  auto impl = std::move(impl_);
  impl->wait();
  span_ = impl->device_span();
}

bool Request::test() {
  if (!impl_) return true;
  if (!impl_->test()) return false;
  span_ = impl_->device_span();
  impl_.reset();
  return true;
}

void Request::complete_quietly() noexcept {
  if (!impl_) return;
  try {
    impl_->wait();
  } catch (...) {
    // A destructor cannot report; the error already surfaced (or will) on the caller's wait().
  }
  impl_.reset();
}

}  // namespace kformer::comm
