// The pass-through calls of the decorators' base (see forwarding_comm.hpp).
#include "forwarding_comm.hpp"

#include <utility>

namespace kformer::comm {

ForwardingCommunicator::ForwardingCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}

int ForwardingCommunicator::rank() const { return inner_->rank(); }
int ForwardingCommunicator::size() const { return inner_->size(); }
std::string ForwardingCommunicator::backend() const { return inner_->backend(); }
void ForwardingCommunicator::barrier() { inner_->barrier(); }
std::vector<int> ForwardingCommunicator::world_ranks() const { return inner_->world_ranks(); }
void ForwardingCommunicator::abort_calls() noexcept { inner_->abort_calls(); }
void ForwardingCommunicator::set_name(const std::string& name) { inner_->set_name(name); }
void ForwardingCommunicator::fence_compute(bool blocking) { inner_->fence_compute(blocking); }
void ForwardingCommunicator::run(const Op& op) { inner_->run(op); }
Request ForwardingCommunicator::start(const Op& op) { return inner_->start(op); }
Request ForwardingCommunicator::start_group(const std::vector<Op>& ops) { return inner_->start_group(ops); }

}  // namespace kformer::comm
