// The live allocations of the default execution space's memory space, as Kokkos reports them
// through its Tools callbacks (allocate/deallocate data), so that comm.strict can tell a buffer
// NCCL could move (inside a View of that space) from one it could not (a stack scalar, a
// std::vector, an unmanaged View over host memory) on every backend, the host ones included.
// Each allocation also records whether it was made as device memory (inside a DeviceScope,
// which kformer's device allocation helpers open: comm/device_view.hpp): in a CPU build the
// device's memory space is HostSpace, so a host View (an explicit HostSpace View, a
// create_mirror) lands in the same space, and only this record tells it from a device buffer.
// Installed once per process, after Kokkos starts and before the Views it must see are made;
// callbacks a Kokkos tool (KOKKOS_TOOLS_LIBS) set before it are still called.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kformer::comm {

class AllocationRegistry {
 public:
  // Starts tracking (idempotent). Needs Kokkos initialised. Allocations made before it are not
  // known, so call it first thing after Kokkos starts.
  static void install();
  static bool installed();

  // Whether [p, p + bytes) lies inside one live allocation; `label` receives its View label.
  static bool contains(const void* p, std::size_t bytes, std::string* label = nullptr);

  // Allocations this thread makes while a DeviceScope lives (scopes nest) are recorded as device
  // allocations. Scopes cost nothing when the registry is not installed.
  class DeviceScope {
   public:
    DeviceScope();
    ~DeviceScope();
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;
  };

  // Whether [p, p + bytes) lies inside one live device allocation: in a build whose device
  // memory is the GPU's (not host-accessible) any live allocation of that space; in a build
  // whose device memory is the host's, one made inside a DeviceScope. `label` as above.
  static bool contains_device(const void* p, std::size_t bytes, std::string* label = nullptr);
  // True where the tracked space is host-accessible (CPU builds): only DeviceScope tells device
  // buffers from host ones there.
  static bool space_is_host();

  // Bytes of the live allocations, and their high-water mark since install() (what the program
  // allocated through Kokkos in that space: its memory, without the runtime's own, which Kokkos
  // makes unlabelled or under a "Kokkos::" label: its internal scratch and team memory).
  static std::uint64_t live_bytes();
  static std::uint64_t peak_bytes();
  static void reset_peak();  // the mark restarts from what is live now

  // The name of the memory space tracked ("Host", "Cuda", ...).
  static const char* space_name();
};

}  // namespace kformer::comm
