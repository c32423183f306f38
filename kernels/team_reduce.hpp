// Row reductions inside a team (one team per row), with a grouping that does not depend on the
// run: the building block of the norms, the softmax and the cross-entropy, and why their
// backwards are bitwise reproducible.
#pragma once

#include <Kokkos_Core.hpp>

#include "work_shape.hpp"

namespace kformer::kernels::detail {

// The 16 lanes of the one-thread reductions below, as one value: GCC's and Clang's vector type in
// host code, so the accumulators stay in one vector register (a zmm with AVX-512, two ymm with
// AVX2) whatever the compiler makes of f; elsewhere (a device pass, another compiler) an array with
// the same two operations. Either way lane l holds the terms c = l mod 16 in order, so the result
// is the same bits.
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
typedef float lanes16 __attribute__((vector_size(64)));
KOKKOS_INLINE_FUNCTION lanes16 lanes_max(const lanes16& acc, const lanes16& q) { return q > acc ? q : acc; }
#else
struct lanes16 {
  float v[16];
  KOKKOS_INLINE_FUNCTION float& operator[](int l) { return v[l]; }
  KOKKOS_INLINE_FUNCTION lanes16& operator+=(const lanes16& q) {
    for (int l = 0; l < 16; ++l) v[l] += q.v[l];
    return *this;
  }
};
KOKKOS_INLINE_FUNCTION lanes16 lanes_max(lanes16 acc, const lanes16& q) {
  for (int l = 0; l < 16; ++l) acc.v[l] = q.v[l] > acc.v[l] ? q.v[l] : acc.v[l];
  return acc;
}
#endif

// Sum over c in [0, n) of f(c) by one thread: 16 accumulators over c mod 16, added as a fixed
// tree. A block of 16 values is computed, then added lane-wise to the accumulators.
template <class F>
KOKKOS_INLINE_FUNCTION float sum_by_lanes(int n, const F& f) {
  constexpr int L = 16;
  lanes16 acc = {};
  const int nb = n / L;
  for (int b = 0; b < nb; ++b) {
    lanes16 q;
    for (int l = 0; l < L; ++l) q[l] = f(b * L + l);
    acc += q;
  }
  float p[L];  // the tail and the tree on scalars: on the vector's lanes they cost the bf16 norms' backward 1.8x
  for (int l = 0; l < L; ++l) p[l] = acc[l];
  for (int l = 0; nb * L + l < n; ++l) p[l] += f(nb * L + l);
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) p[l] += p[l + w];
  return p[0];
}

// Max over c in [0, n) of f(c) by one thread (n >= 1), in the same lane form. (An array of
// accumulators compiled to lane-by-lane compares under GCC 12: half the vector form's rate, 6.5
// against 13.9 GB/s over logits rows in memory on one Sapphire Rapids core.)
template <class F>
KOKKOS_INLINE_FUNCTION float max_by_lanes(int n, const F& f) {
  constexpr int L = 16;
  const float first = f(0);
  lanes16 acc;
  for (int l = 0; l < L; ++l) acc[l] = first;
  const int nb = n / L;
  for (int b = 0; b < nb; ++b) {
    lanes16 q;
    for (int l = 0; l < L; ++l) q[l] = f(b * L + l);
    acc = lanes_max(acc, q);
  }
  float p[L];
  for (int l = 0; l < L; ++l) p[l] = acc[l];
  for (int l = 0; nb * L + l < n; ++l) {
    const float v = f(nb * L + l);
    p[l] = v > p[l] ? v : p[l];
  }
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) p[l] = p[l + w] > p[l] ? p[l + w] : p[l];
  return p[0];
}

// Sum over c in [0, n) of f(c) within a team, with a grouping fixed by n and the team size.
// GPU shape: thread k of the team adds c = k, k + ts, k + 2 ts, ... (so consecutive threads read
// consecutive elements and a warp's loads coalesce), then the team reduce combines the threads'
// sums in its fixed tree. Host shape: a team is one thread there, which walks the whole row with
// sum_by_lanes (one vector register, no reduce call); should a host team have several threads,
// each computes the same whole sum.
template <Shape S, class Member, class F>
KOKKOS_INLINE_FUNCTION float team_row_sum(const Member& team, int n, const F& f) {
  if constexpr (S == Shape::gpu) {
    float s = 0.f;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n), [&](const int c, float& acc) { acc += f(c); }, s);
    return s;
  } else {
    (void)team;
    return sum_by_lanes(n, f);
  }
}

// Max over c in [0, n) of f(c) across a team (n >= 1), in the two shapes of team_row_sum.
template <Shape S, class Member, class F>
KOKKOS_INLINE_FUNCTION float team_row_max(const Member& team, int n, const F& f) {
  if constexpr (S == Shape::gpu) {
    float m = 0.f;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n),
        [&](const int c, float& acc) {
          const float v = f(c);
          acc = v > acc ? v : acc;
        },
        Kokkos::Max<float>(m));
    return m;
  } else {
    (void)team;
    return max_by_lanes(n, f);
  }
}

}  // namespace kformer::kernels::detail
