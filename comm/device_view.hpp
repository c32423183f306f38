// Device buffers as kformer allocates them: a View of the default execution space's memory space
// made inside an AllocationRegistry::DeviceScope, so the registry records it as device memory.
// comm.strict accepts only such buffers where the device's memory is the host's (CPU builds), and
// so refuses there a host View (an explicit HostSpace View, a create_mirror) that NCCL would
// refuse on a GPU. Every buffer kformer hands to a Communicator is made by this function (or by
// miniapp/device.hpp's scratch() and device_buffer(), which call it).
#pragma once

#include <Kokkos_Core.hpp>

#include <type_traits>
#include <utility>

#include "allocation_registry.hpp"

namespace kformer::comm {

// View(args...) (a label or a Kokkos::view_alloc, then the extents), recorded as a device allocation.
template <class View, class... Args>
View device_view(Args&&... args) {
  static_assert(std::is_same<typename View::memory_space, Kokkos::DefaultExecutionSpace::memory_space>::value,
                "comm::device_view makes Views of Kokkos::DefaultExecutionSpace::memory_space");
  const AllocationRegistry::DeviceScope device;
  return View(std::forward<Args>(args)...);
}

}  // namespace kformer::comm
