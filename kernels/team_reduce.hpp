// Row reductions inside a team (one team per row), with a grouping that does not depend on the
// run: the building block of the norms and the softmax, and why their backwards are bitwise
// reproducible.
#pragma once

#include <Kokkos_Core.hpp>

namespace kformer::kernels::detail {

// Sum over c in [0, n) of f(c) across a team, in chunks of eight terms added as a fixed tree:
// eight independent partial sums let the host compiler vectorise, and shorten the dependence
// chain of the scalar accumulator eightfold.
template <class Member, class F>
KOKKOS_INLINE_FUNCTION float team_row_sum(const Member& team, int n, const F& f) {
  const int nchunk = (n + 7) / 8;
  float s = 0.f;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, nchunk),
      [&](const int k, float& acc) {
        float p[8];
        const int c0 = 8 * k;
        if (c0 + 8 <= n) {
          for (int l = 0; l < 8; ++l) p[l] = f(c0 + l);
        } else {
          for (int l = 0; l < 8; ++l) p[l] = c0 + l < n ? f(c0 + l) : 0.f;
        }
        acc += ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
      },
      s);
  return s;
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
