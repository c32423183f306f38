// The few spellings that differ between Kokkos 3.4 and 4.x, hidden behind one name each
// (see ../shared/KOKKOS-COMPAT.md in the design notes). Include this instead of guessing.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

// Math functions: Kokkos::Experimental:: up to 3.6, Kokkos:: from 3.7 (and only there in 4.6).
namespace kformer::kmath {
#if KOKKOS_VERSION >= 30700
using Kokkos::erf;
using Kokkos::exp;
using Kokkos::fabs;
using Kokkos::fmax;
using Kokkos::fmin;
using Kokkos::log;
using Kokkos::pow;
using Kokkos::sqrt;
using Kokkos::tanh;
using Kokkos::cos;
using Kokkos::sin;
#else
using Kokkos::Experimental::erf;
using Kokkos::Experimental::exp;
using Kokkos::Experimental::fabs;
using Kokkos::Experimental::fmax;
using Kokkos::Experimental::fmin;
using Kokkos::Experimental::log;
using Kokkos::Experimental::pow;
using Kokkos::Experimental::sqrt;
using Kokkos::Experimental::tanh;
using Kokkos::Experimental::cos;
using Kokkos::Experimental::sin;
#endif
// Kokkos::numbers is 4.0+.
constexpr double pi = 3.14159265358979323846;
}  // namespace kformer::kmath

// MDRangePolicy's iteration pattern, spelled out: the last index fastest, as in kformer's
// LayoutRight views. The default follows the backend's default layout, which on CUDA and HIP is
// LayoutLeft (first index fastest), so neighbouring threads would stride by a whole row.
namespace kformer::kernels {
template <int N>
using RightRank = Kokkos::Rank<N, Kokkos::Iterate::Right, Kokkos::Iterate::Right>;

// exec.fence() with a label the Kokkos tools see (nsys through the NVTX connector, and
// test_step_sync's fence count). Labelled fences are 3.5+; before, the label is reported by hand.
template <class ExecSpace>
void fence(const ExecSpace& exec, const char* label) {
#if KOKKOS_VERSION >= 30500
  exec.fence(label);
#else
  const bool tool = Kokkos::Tools::profileLibraryLoaded();
  std::uint64_t id = 0;
  if (tool) Kokkos::Tools::beginFence(label, 0, &id);
  exec.fence();
  if (tool) Kokkos::Tools::endFence(id);
#endif
}
}  // namespace kformer::kernels

// A C++14-configured 3.4 does not define it.
#ifndef KOKKOS_CLASS_LAMBDA
#define KOKKOS_CLASS_LAMBDA [ =, *this ] KOKKOS_FUNCTION
#endif
