// Sums in a fixed order with several loads in flight: a GPU thread that adds one loaded value at a
// time waits a memory latency for each, and a column of partial sums walked that way left a
// reduction far below the bandwidth (bias_backward at 0.03 of the copy on an H200). Loading a group
// of values before adding them keeps the order, and so the bits, of the plain loop.
#pragma once

#include <Kokkos_Core.hpp>

namespace kformer::kernels::detail {

constexpr int kSumInFlight = 8;

// sum + v(0) + v(1) + ... + v(n - 1), added in that order, kSumInFlight values loaded at a time.
template <class F>
KOKKOS_INLINE_FUNCTION float add_in_order(float sum, int n, const F& v) {
  constexpr int K = kSumInFlight;
  int i = 0;
  for (; i + K <= n; i += K) {
    float q[K];
    for (int k = 0; k < K; ++k) q[k] = v(i + k);
    for (int k = 0; k < K; ++k) sum += q[k];
  }
  for (; i < n; ++i) sum += v(i);
  return sum;
}

// Two sums over i in [0, n) in one walk, each in order: a += first, b += second of v(i) (a pair),
// kSumInFlight pairs loaded at a time.
template <class F>
KOKKOS_INLINE_FUNCTION void add_pairs_in_order(float& a, float& b, int n, const F& v) {
  constexpr int K = kSumInFlight;
  int i = 0;
  for (; i + K <= n; i += K) {
    float qa[K], qb[K];
    for (int k = 0; k < K; ++k) v(i + k, qa[k], qb[k]);
    for (int k = 0; k < K; ++k) a += qa[k], b += qb[k];
  }
  for (; i < n; ++i) {
    float x, y;
    v(i, x, y);
    a += x, b += y;
  }
}

}  // namespace kformer::kernels::detail
