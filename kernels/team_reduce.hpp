// Row reductions inside a team (one team per row), with a grouping that does not depend on the
// run: the building block of the norms and the softmax, and why their backwards are bitwise
// reproducible.
#pragma once

#include <Kokkos_Core.hpp>

namespace kformer::kernels::detail {

// Sum over c in [0, n) of f(c) by one thread: eight accumulators over c mod 8 (one vector
// register once the compiler is done), added as a fixed tree.
template <class F>
KOKKOS_INLINE_FUNCTION float sum_by_lanes(int n, const F& f) {
  float p[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int c = 0;
  for (; c + 8 <= n; c += 8)
    for (int l = 0; l < 8; ++l) p[l] += f(c + l);
  for (int l = 0; c + l < n; ++l) p[l] += f(c + l);
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

// Sum over c in [0, n) of f(c) within a team, with a fixed grouping: eight partial sums over
// c mod 8, added as a fixed tree. On a GPU the team's threads share the chunks of eight through
// a team reduce; on the host (where a team is one thread) each thread walks the whole row with
// eight accumulators, which the compiler turns into one vector register and no reduce call.
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
  float m = 0.f;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, n),
      [&](const int c, float& acc) {
        const float v = f(c);
        acc = v > acc ? v : acc;
      },
      Kokkos::Max<float>(m));
  return m;
}

}  // namespace kformer::kernels::detail
