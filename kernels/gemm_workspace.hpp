// A scratch buffer in an execution space's memory that lives from one call to the next: the
// native GEMM packs its operands into it on every call, and allocating (and page-faulting) a
// fresh one each time cost a few percent of a GEMM at transformer shapes. It grows as needed,
// is released at Kokkos::finalize (a finalize hook, since a static View must not outlive
// Kokkos), and is used by one call at a time: hold the lock returned with it until done, then
// call release_workspace().
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <mutex>
#include <utility>

namespace kformer::kernels::detail {

template <class MemorySpace>
class GemmWorkspace {
 public:
  // At least n floats, valid while the returned lock is held.
  static std::pair<float*, std::unique_lock<std::mutex>> get(std::size_t n) {
    std::unique_lock<std::mutex> lock(state().mutex);
    State& s = state();
    if (s.buffer.extent(0) < n) {
      Kokkos::fence();  // a GPU kernel of an earlier call may still read it
      s.buffer = {};  // free the old one first: the two need not coexist
      s.buffer = Kokkos::View<float*, MemorySpace>(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "kformer::gemm_workspace"), n);
      if (!s.hooked) {
        Kokkos::push_finalize_hook([] {
          state().buffer = {};
          state().hooked = false;
        });
        s.hooked = true;
      }
    }
    return {s.buffer.data(), std::move(lock)};
  }

 private:
  struct State {
    std::mutex mutex;
    Kokkos::View<float*, MemorySpace> buffer;
    bool hooked = false;
  };
  static State& state() {
    static State s;
    return s;
  }
};

// What a call does as it hands the workspace back. On the host it waits for its kernels (free:
// host back-ends run a parallel_for to its end). On a GPU nothing: kformer's kernels run on one
// execution-space instance, whose stream orders the next call's kernels after this one's, and a
// buffer that must grow is freed only after a fence (get()); a host sync per GEMM would stall the
// step (issue 19).
template <class ExecSpace>
void release_workspace(const ExecSpace& exec) {
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible) exec.fence();
}

}  // namespace kformer::kernels::detail
