// Shared by the kernel tests: the execution space under test (one per test binary, set by
// CMake), fresh random inputs, NaN poisoning of outputs, host copies in float64, and the
// norm-wise relative error ||got - ref|| / ||ref|| that the tolerances are stated in.
#pragma once

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "work_shape.hpp"

namespace ktest {

using Exec = KFORMER_TEST_EXECSPACE;
using Mem = Exec::memory_space;
template <class T>
using View = Kokkos::View<T, Kokkos::LayoutRight, Mem>;

// A seed that differs run to run (fresh inputs every time) and is printed on failure.
inline std::uint64_t fresh_seed() {
  static std::random_device rd;
  const std::uint64_t s = (std::uint64_t(rd()) << 32) ^ rd();
  ::testing::Test::RecordProperty("seed", std::to_string(s));
  return s;
}

// Fills a device view of any rank with uniform values in [lo, hi); returns the host copy.
template <class V>
std::vector<double> fill_random(const V& v, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) {
  auto h = Kokkos::create_mirror_view(v);
  using T = typename V::non_const_value_type;
  T* p = h.data();
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> out(v.span());
  for (std::size_t i = 0; i < v.span(); ++i) {
    p[i] = static_cast<T>(dist(rng));
    out[i] = static_cast<double>(p[i]);
  }
  Kokkos::deep_copy(v, h);
  return out;
}

// Every element NaN, so an element the kernel forgets to write fails the comparison.
template <class V>
void poison(const V& v) {
  Kokkos::deep_copy(v, std::numeric_limits<typename V::non_const_value_type>::quiet_NaN());
}

template <class V>
std::vector<double> to_host(const V& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<double> out(v.span());
  for (std::size_t i = 0; i < v.span(); ++i) out[i] = static_cast<double>(h.data()[i]);
  return out;
}

// ||got - ref||_2 / max(||scale||_2, tiny); NaN anywhere in `got` gives +inf. With scale the size
// of the terms a result is made of: its error where the result itself may cancel to near zero.
inline double err_against(const std::vector<double>& got, const std::vector<double>& ref,
                          const std::vector<double>& scale) {
  if (got.size() != ref.size() || got.size() != scale.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += scale[i] * scale[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// ||got - ref||_2 / max(||ref||_2, tiny)
inline double rel_err(const std::vector<double>& got, const std::vector<double>& ref) { return err_against(got, ref, ref); }

// Calls f(shape) with shape an std::integral_constant of the host and then the GPU work shape
// (kernels/work_shape.hpp), under a SCOPED_TRACE naming it: the GPU shape's thread layout runs
// on the host too, against the same references as the shape the backend uses. On a GPU backend
// only the GPU shape runs: the host shape assumes a team of one thread (the in-place causal
// softmax, for one, has every thread of a team read a row that the other warps already
// overwrite), so on a GPU it races, and no GPU run ever takes it.
template <class F>
void for_each_shape(F&& f) {
  using kformer::kernels::Shape;
  if constexpr (kformer::kernels::runs_on_host<Exec>) {
    SCOPED_TRACE("host work shape");
    f(std::integral_constant<Shape, Shape::host>{});
  }
  {
    SCOPED_TRACE("GPU work shape");
    f(std::integral_constant<Shape, Shape::gpu>{});
  }
}

}  // namespace ktest
