// The live allocations of the default execution space's memory space, as Kokkos reports them
// through its Tools callbacks (allocate/deallocate data), so that comm.strict can tell a buffer
// NCCL could move (inside a View of that space) from one it could not (a stack scalar, a
// std::vector, an unmanaged View over host memory) on every backend, the host ones included.
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

  // Bytes of the live allocations, and their high-water mark since install() (what the program
  // allocated through Kokkos in that space: its memory, without the runtime's own).
  static std::uint64_t live_bytes();
  static std::uint64_t peak_bytes();
  static void reset_peak();  // the mark restarts from what is live now

  // The name of the memory space tracked ("Host", "Cuda", ...).
  static const char* space_name();
};

}  // namespace kformer::comm
