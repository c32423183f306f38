// The view types every kernel signature uses: LayoutRight (row-major, so the trainer, BLAS, MPI
// and NCCL can treat any buffer as a flat array) in the memory space of the execution space.
#pragma once

#include <Kokkos_Core.hpp>

namespace kformer::kernels {

// DView<float**, Exec>: a row-major view in Exec's memory space. As a parameter type its memory
// space is not deduced, so any view with the same data type and layout converts to it.
template <class DataType, class ExecSpace>
using DView = Kokkos::View<DataType, Kokkos::LayoutRight, typename ExecSpace::memory_space>;

// True for execution spaces that run on the host (Serial, OpenMP, Threads): there a team has
// one thread, so kernels pick larger tiles and loop orders that the compiler vectorises.
template <class ExecSpace>
inline constexpr bool runs_on_host =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible;

}  // namespace kformer::kernels
