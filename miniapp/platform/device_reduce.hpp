// A handful of host values (a loss, a norm, a flag, a table of per-rank figures) reduced over a
// communicator. NCCL takes only device memory, so the values travel through a small device
// buffer: copied in, all-reduced there, copied back. The buffer is kept and grown as needed, so a
// caller that reduces every iteration (the trainer) holds one DeviceReduce and allocates once;
// a one-off caller uses a temporary. The reduction is the same call on the same values in the
// same order as an all-reduce of the host values would be, so results are bitwise the same.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "platform/device.hpp"

namespace kformer {

class DeviceReduce {
 public:
  // In place: values[i] becomes the reduction over the ranks of c of their values[i].
  void allreduce(comm::Communicator& c, std::vector<double>& values, comm::ReduceOp op,
                 comm::CallSite at = comm::CallSite::here());
  void allreduce(comm::Communicator& c, std::vector<std::int32_t>& values, comm::ReduceOp op,
                 comm::CallSite at = comm::CallSite::here());
  // One value: returns the reduction. `at` is the caller's line, named by strict mode and the
  // watchdog (not this file's).
  double allreduce(comm::Communicator& c, double value, comm::ReduceOp op,
                 comm::CallSite at = comm::CallSite::here());
  std::int32_t allreduce(comm::Communicator& c, std::int32_t value, comm::ReduceOp op,
                 comm::CallSite at = comm::CallSite::here());

 private:
  // LayoutRight: the communicator takes one contiguous row-major block.
  Kokkos::View<double*, Kokkos::LayoutRight, Mem> f64_;
  Kokkos::View<std::int32_t*, Kokkos::LayoutRight, Mem> i32_;
};

}  // namespace kformer
