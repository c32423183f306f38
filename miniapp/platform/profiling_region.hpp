// A Kokkos profiling region for the lifetime of an object: how the phases of a training step
// (kformer::step, forward, backward, grad_sync, grad_norm, optimizer, checkpoint, ...) show up in
// nsys (through the Kokkos NVTX connector) and in the Kokkos tools (space-time-stack and others).
// Without a tool loaded it costs one check. While the step's work is described (call_record.hpp)
// the regions go to the sink, which splits the list into the phases predict costs.
#pragma once

#include <Kokkos_Core.hpp>

#include "call_record.hpp"

namespace kformer {

class ProfilingRegion {
 public:
  explicit ProfilingRegion(const char* name)
      : name_(name), sink_(kernels::described()), active_(!sink_ && Kokkos::Profiling::profileLibraryLoaded()) {
    if (sink_) sink_->region(name, true);
    if (active_) Kokkos::Profiling::pushRegion(name);
  }
  ~ProfilingRegion() {
    if (sink_) sink_->region(name_, false);
    if (active_) Kokkos::Profiling::popRegion();
  }
  ProfilingRegion(const ProfilingRegion&) = delete;
  ProfilingRegion& operator=(const ProfilingRegion&) = delete;

 private:
  const char* name_;
  kernels::CallSink* sink_;
  bool active_;
};

}  // namespace kformer
