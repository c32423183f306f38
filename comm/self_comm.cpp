// The `self` backend (one rank).
#include "self_comm.hpp"

#include <cstring>

namespace kformer::comm {

std::unique_ptr<Communicator> SelfComm::split(int, int) { return std::make_unique<SelfComm>(); }

void SelfComm::allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp) {
  if (send != recv && count > 0) std::memcpy(recv, send, count * dtype_size(type));
}

}  // namespace kformer::comm
