// The execution space the mini-app runs on (Kokkos' default: CUDA, OpenMP or Serial, whichever
// the build enables first) and the view types of its buffers.
#pragma once

#include <Kokkos_Core.hpp>

#include "call_record.hpp"
#include "comm/device_view.hpp"
#include "platform/described_memory.hpp"
#include "view_types.hpp"

namespace kformer {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
template <class DataType>
using DV = kernels::DView<DataType, Exec>;

// Device buffers are made by these two (comm::device_view: recorded as device allocations, so
// comm.strict can tell them from host Views in a CPU build; comm/device_view.hpp). While the
// step's work is described (kernels/call_record.hpp) they hold no memory (described_memory.hpp).
template <class DataType, class... Extents>
DV<DataType> described_view(Extents... n) {
  using T = typename DV<DataType>::value_type;
  const std::size_t elements = (std::size_t(1) * ... * std::size_t(n));
  return DV<DataType>(static_cast<T*>(described_address(elements * sizeof(T))), n...);
}
// A device buffer without initialisation (every user writes it before reading).
template <class DataType, class... Extents>
DV<DataType> scratch(const std::string& label, Extents... n) {
  if (kernels::described()) return described_view<DataType>(n...);
  return comm::device_view<DV<DataType>>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), n...);
}
// A device buffer of zeros.
template <class DataType, class... Extents>
DV<DataType> device_buffer(const std::string& label, Extents... n) {
  if (kernels::described()) return described_view<DataType>(n...);
  return comm::device_view<DV<DataType>>(label, n...);
}

inline DV<float**> scratch_view(const std::string& label, std::int64_t rows, std::int64_t cols) {
  return scratch<float**>(label, rows, cols);
}

// Views over a slice of a flat buffer.
inline DV<float**> as_matrix(float* p, std::int64_t rows, std::int64_t cols) {
  return Kokkos::View<float**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(p, rows, cols);
}
inline DV<float***> as_tensor3(float* p, std::int64_t a, std::int64_t b, std::int64_t c) {
  return Kokkos::View<float***, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(p, a, b, c);
}
template <class T>
DV<T*> as_vector(T* p, std::int64_t n) {
  return Kokkos::View<T*, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(p, n);
}

// n floats between a device buffer and host memory (a plain copy when the space is the host's).
inline void copy_to_host(const float* device, std::int64_t n, float* host) {
  Kokkos::deep_copy(Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host, n),
                    as_vector(const_cast<float*>(device), n));
}
inline void copy_to_device(const float* host, std::int64_t n, float* device) {
  Kokkos::deep_copy(as_vector(device, n),
                    Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host, n));
}

}  // namespace kformer
