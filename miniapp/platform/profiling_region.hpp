// A Kokkos profiling region for the lifetime of an object: how the phases of a training step
// (kformer::step, forward, backward, grad_sync, grad_norm, optimizer, checkpoint, ...) show up in
// nsys (through the Kokkos NVTX connector) and in the Kokkos tools (space-time-stack and others).
// Without a tool loaded it costs one check.
#pragma once

#include <Kokkos_Core.hpp>

namespace kformer {

class ProfilingRegion {
 public:
  explicit ProfilingRegion(const char* name) : active_(Kokkos::Profiling::profileLibraryLoaded()) {
    if (active_) Kokkos::Profiling::pushRegion(name);
  }
  ~ProfilingRegion() {
    if (active_) Kokkos::Profiling::popRegion();
  }
  ProfilingRegion(const ProfilingRegion&) = delete;
  ProfilingRegion& operator=(const ProfilingRegion&) = delete;

 private:
  bool active_;
};

}  // namespace kformer
