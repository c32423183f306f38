// A scratch View that a kernel keeps from one call to the next instead of allocating it per call
// (an allocation is a cudaMalloc and a device synchronisation on a GPU, inside every training
// step). One buffer per (Tag, element type, memory space), grown when a call needs more, released
// at Kokkos::finalize by a finalize hook (a static View must not outlive Kokkos).
//
// Calls on one execution space instance are ordered, so a kernel may reuse the buffer while an
// earlier kernel that used it is still queued: the earlier one runs first. Growing waits for the
// device (such a kernel may still read the old buffer) and then frees it; it happens in the first
// steps only.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <mutex>
#include <string>

namespace kformer::kernels::detail {

// At least n elements (contents undefined), labelled `label` when (re)allocated.
template <class Tag, class T, class MemorySpace>
Kokkos::View<T*, MemorySpace> kept_buffer(std::size_t n, const char* label) {
  struct State {
    std::mutex mutex;
    Kokkos::View<T*, MemorySpace> view;
    bool hooked = false;
  };
  static State st;
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.view.extent(0) < n) {
    if (st.view.extent(0) > 0) Kokkos::fence();
    st.view = {};  // free the old one first: the two need not coexist
    st.view = Kokkos::View<T*, MemorySpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n);
    if (!st.hooked) {
      Kokkos::push_finalize_hook([] {
        st.view = {};
        st.hooked = false;
      });
      st.hooked = true;
    }
  }
  return st.view;
}

}  // namespace kformer::kernels::detail
