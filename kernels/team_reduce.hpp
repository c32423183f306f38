// Row reductions inside a team (one team per row), with a grouping that does not depend on the
// run: the building block of the norms and the softmax, and why their backwards are bitwise
// reproducible.
#pragma once

#include <Kokkos_Core.hpp>

namespace kformer::kernels::detail {

// Sum over c in [0, n) of f(c) by one thread: 16 accumulators over c mod 16, added as a fixed
// tree. Written as a block of values then a lane-wise add so that GCC keeps the accumulators in
// one zmm register (the previous form, p[l] += f(c + l) over 8 lanes, compiled to scalar adds
// with lane extracts).
template <class F>
KOKKOS_INLINE_FUNCTION float sum_by_lanes(int n, const F& f) {
  constexpr int L = 16;
  float p[L] = {};
  const int nb = n / L;
  for (int b = 0; b < nb; ++b) {
    float q[L];
    for (int l = 0; l < L; ++l) q[l] = f(b * L + l);
    for (int l = 0; l < L; ++l) p[l] += q[l];
  }
  for (int l = 0; nb * L + l < n; ++l) p[l] += f(nb * L + l);
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) p[l] += p[l + w];
  return p[0];
}

// Max over c in [0, n) of f(c) by one thread (n >= 1), in the same lane form.
template <class F>
KOKKOS_INLINE_FUNCTION float max_by_lanes(int n, const F& f) {
  constexpr int L = 16;
  const float first = f(0);
  float p[L];
  for (int l = 0; l < L; ++l) p[l] = first;
  const int nb = n / L;
  for (int b = 0; b < nb; ++b) {
    float q[L];
    for (int l = 0; l < L; ++l) q[l] = f(b * L + l);
    for (int l = 0; l < L; ++l) p[l] = q[l] > p[l] ? q[l] : p[l];
  }
  for (int l = 0; nb * L + l < n; ++l) {
    const float v = f(nb * L + l);
    p[l] = v > p[l] ? v : p[l];
  }
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) p[l] = p[l + w] > p[l] ? p[l + w] : p[l];
  return p[0];
}

// Sum over c in [0, n) of f(c) within a team, with a fixed grouping. On a GPU the team's threads
// share chunks of eight through a team reduce; on the host (where a team is one thread) each
// thread walks the whole row with sum_by_lanes: one vector register and no reduce call.
template <class Member, class F>
KOKKOS_INLINE_FUNCTION float team_row_sum(const Member& team, int n, const F& f) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
  const int nchunk = (n + 7) / 8;
  float s = 0.f;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, nchunk),
      [&](const int k, float& acc) {
        float p[8];
        const int c0 = 8 * k;
        for (int l = 0; l < 8; ++l) p[l] = c0 + l < n ? f(c0 + l) : 0.f;
        acc += ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
      },
      s);
  return s;
#else
  (void)team;  // every thread of the team computes the whole sum: same value, no reduce needed
  return sum_by_lanes(n, f);
#endif
}

// Max over c in [0, n) of f(c) across a team (n >= 1).
template <class Member, class F>
KOKKOS_INLINE_FUNCTION float team_row_max(const Member& team, int n, const F& f) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
  float m = 0.f;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, n),
      [&](const int c, float& acc) {
        const float v = f(c);
        acc = v > acc ? v : acc;
      },
      Kokkos::Max<float>(m));
  return m;
#else
  (void)team;  // as in team_row_sum: every thread of the team computes the whole max
  return max_by_lanes(n, f);
#endif
}

}  // namespace kformer::kernels::detail
