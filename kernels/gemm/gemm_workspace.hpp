// The native GEMM's packing buffer in an execution space's memory, kept from one call to the
// next (kept_buffer.hpp): it packs its operands into it on every call, and allocating (and
// page-faulting) a fresh one each time cost a few percent of a GEMM at transformer shapes. One
// call uses it at a time: hold the lock returned with it until done, then call
// release_workspace().
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <mutex>
#include <utility>

#include "kept_buffer.hpp"

namespace kformer::kernels::detail {

template <class MemorySpace>
class GemmWorkspace {
 public:
  // At least n floats, valid while the returned lock is held.
  static std::pair<float*, std::unique_lock<std::mutex>> get(std::size_t n) {
    static std::mutex in_use;
    std::unique_lock<std::mutex> lock(in_use);
    return {kept_buffer<GemmWorkspace, float, MemorySpace>(n, "kformer::gemm_workspace").data(), std::move(lock)};
  }
};

// What a call does as it hands the workspace back. On the host it waits for its kernels (free:
// host back-ends run a parallel_for to its end). On a GPU nothing: kformer's kernels run on one
// execution-space instance, whose stream orders the next call's kernels after this one's, and a
// buffer that must grow is freed only after a fence (kept_buffer.hpp); a host sync per GEMM would
// stall the step (issue 19).
template <class ExecSpace>
void release_workspace(const ExecSpace& exec) {
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible) exec.fence();
}

}  // namespace kformer::kernels::detail
