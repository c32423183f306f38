// Counter-based random numbers: a value is a pure function of (key, counter), so any rank can
// produce any element of a global tensor without generating the ones before it. This is what
// makes parameter initialisation and random data independent of the parallel layout.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

#include "kokkos_compat.hpp"

namespace kformer::kernels {

// splitmix64's finaliser: a bijective 64-bit mix with full avalanche.
KOKKOS_INLINE_FUNCTION std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

KOKKOS_INLINE_FUNCTION std::uint64_t counter_hash(std::uint64_t key, std::uint64_t counter) {
  return mix64(key ^ mix64(counter + 0x9E3779B97F4A7C15ull));
}

// Uniform in (0, 1), 53 bits.
KOKKOS_INLINE_FUNCTION double counter_uniform(std::uint64_t key, std::uint64_t counter) {
  return (static_cast<double>(counter_hash(key, counter) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal by Box-Muller from the counters 2i and 2i+1.
KOKKOS_INLINE_FUNCTION double counter_normal(std::uint64_t key, std::uint64_t i) {
  const double u1 = counter_uniform(key, 2 * i), u2 = counter_uniform(key, 2 * i + 1);
  return kmath::sqrt(-2.0 * kmath::log(u1)) * kmath::cos(2.0 * kmath::pi * u2);
}

// The key of a named stream: FNV-1a of the name, mixed with the seed.
inline std::uint64_t stream_key(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return mix64(h ^ mix64(seed));
}

// Fills the local block x(r, c) of a global (R, global_cols) matrix whose top-left corner is
// (row0, col0) with std * N(0,1), element (i, j) drawn from the counter (row0+i)*global_cols +
// col0+j. A 1-D tensor is the block with one row.
template <class ExecSpace, class View2>
void fill_normal_block(const ExecSpace& exec, const View2& x, std::uint64_t key, std::int64_t global_cols,
                       std::int64_t row0, std::int64_t col0, float std_dev) {
  const std::int64_t rows = x.extent(0), cols = x.extent(1);
  Kokkos::parallel_for(
      "fill_normal_block", Kokkos::MDRangePolicy<ExecSpace, RightRank<2>>(exec, {0, 0}, {rows, cols}),
      KOKKOS_LAMBDA(const std::int64_t i, const std::int64_t j) {
        const std::uint64_t n = static_cast<std::uint64_t>((row0 + i) * global_cols + col0 + j);
        x(i, j) = static_cast<float>(std_dev * counter_normal(key, n));
      });
}

}  // namespace kformer::kernels
