// The comm.strict decorator (see strict_comm.hpp).
#include "strict_comm.hpp"

#include <sstream>
#include <stdexcept>

#include "allocation_registry.hpp"

namespace kformer::comm {
namespace {

// The bytes a call reads (send) and writes (recv), by the buffer rules of communicator.hpp.
struct Regions {
  std::size_t send = 0, recv = 0;
};

Regions regions(const Op& op, int n) {
  const std::size_t chunk = op.count * dtype_size(op.type), whole = chunk * static_cast<std::size_t>(n);
  switch (op.kind) {
    case OpKind::allreduce: return {chunk, chunk};
    case OpKind::reduce_scatter: return {whole, chunk};
    case OpKind::allgather: return {chunk, whole};
    case OpKind::broadcast: return {0, chunk};
    case OpKind::send: return {chunk, 0};
    case OpKind::recv: return {0, chunk};
  }
  return {};
}

}  // namespace

StrictComm::StrictComm(std::unique_ptr<Communicator> inner, std::shared_ptr<StreamQueue> stream)
    : ForwardingCommunicator(std::move(inner)), stream_(std::move(stream)) {
  if (!inner_ || !stream_) throw std::invalid_argument("StrictComm: needs a communicator and a stream");
  AllocationRegistry::install();
}

StrictComm::~StrictComm() { stream_->forget(*inner_); }

void StrictComm::set_name(const std::string& name) {
  name_ = name;
  inner_->set_name(name);
}

std::unique_ptr<Communicator> StrictComm::split(int color, int key) {
  stream_->drain();
  return std::make_unique<StrictComm>(inner_->split(color, key), stream_);
}

void StrictComm::barrier() {
  stream_->drain();
  inner_->barrier();
}

void StrictComm::check_buffers(const Op& op) const {
  const Regions r = regions(op, size());
  for (const bool sending : {true, false}) {
    const void* p = sending ? op.send : op.recv;
    const std::size_t bytes = sending ? r.send : r.recv;
    if (bytes == 0 || AllocationRegistry::contains_device(p, bytes)) continue;
    std::ostringstream line;
    line << "comm.strict: " << op_name(op.kind) << " of " << op_bytes(op, size()) << " B (" << dtype_name(op.type)
         << ")" << (name_.empty() ? "" : " on the " + name_ + " group");
    const std::string site = describe(op.site);
    if (!site.empty()) line << " called at " << site;
    line << ": its " << (sending ? "send" : "receive") << " buffer " << p;
    std::string label;
    if (AllocationRegistry::contains(p, bytes, &label))  // a host View in a CPU build (allocation_registry.hpp)
      line << " lies in the host View '" << label
           << "', not in a device allocation (a HostSpace View or a host mirror: on a GPU it would be host memory, "
              "which NCCL does not move): pass a View made by comm::device_view (miniapp: scratch, device_buffer)";
    else
      line << " is not inside a live allocation of " << AllocationRegistry::space_name()
           << " memory (NCCL moves device memory only): pass a device View made by comm::device_view (miniapp: "
              "scratch, device_buffer), e.g. reduce scalars through a small device View";
    throw std::invalid_argument(line.str());
  }
}

void StrictComm::run(const Op& op) { start(op).wait(); }

Request StrictComm::start(const Op& op) {
  check_buffers(op);
  return stream_->enqueue(*inner_, {op}, false);
}

Request StrictComm::start_group(const std::vector<Op>& ops) {
  for (const Op& op : ops) check_buffers(op);
  return stream_->enqueue(*inner_, ops, true);
}

}  // namespace kformer::comm
