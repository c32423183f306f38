// The row normalisation shared by LayerNorm (centred, with bias) and RMSNorm (not centred, no
// bias): one implementation, so the two cannot drift apart. Public entry points are in
// layernorm.hpp and rmsnorm.hpp. Rows are tokens: N = B*T rows of C channels.
//
// Determinism: every sum has a fixed grouping (row sums in chunks of 8 through a team reduce;
// weight/bias gradients as per-column loops over the rows in order), so the backward is bitwise
// reproducible run to run; there are no atomics.
#pragma once

#include "kokkos_compat.hpp"
#include "team_reduce.hpp"
#include "view_types.hpp"

namespace kformer::kernels::detail {

// out (N,C) = (x - mu) * rstd * w (+ b); mu = mean of the row when `centered`, else 0;
// rstd = 1 / sqrt(mean((x - mu)^2) + eps). Saves mean (N) when centred, rstd (N) always.
template <class ExecSpace>
void norm_forward(const ExecSpace& exec, const DView<float**, ExecSpace>& out,
                  const DView<float*, ExecSpace>& mean, const DView<float*, ExecSpace>& rstd,
                  const DView<const float**, ExecSpace>& x, const DView<const float*, ExecSpace>& w,
                  const DView<const float*, ExecSpace>& b, float eps, bool centered) {
  const int N = static_cast<int>(x.extent(0)), C = static_cast<int>(x.extent(1));
  const bool has_bias = b.extent(0) > 0;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "kformer::norm_forward", Policy(exec, N, Kokkos::AUTO),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank();
        const float mu = centered ? team_row_sum(team, C, [&](int c) { return x(r, c); }) / C : 0.f;
        const float var = team_row_sum(team, C, [&](int c) {
                            const float d = x(r, c) - mu;
                            return d * d;
                          }) / C;
        const float rs = 1.f / kmath::sqrt(var + eps);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) {
          out(r, c) = (x(r, c) - mu) * rs * w(c) + (has_bias ? b(c) : 0.f);
        });
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          if (centered) mean(r) = mu;
          rstd(r) = rs;
        });
      });
}

// dx (N,C) = rstd * (g - mean(g) [centred only] - xhat * mean(g * xhat)), g = dy * w;
// dw (C) += sum over rows of dy * xhat; db (C) += sum over rows of dy (when db is not empty):
// parameter gradients accumulate over micro-batches, as the GEMM's do.
template <class ExecSpace>
void norm_backward(const ExecSpace& exec, const DView<float**, ExecSpace>& dx,
                   const DView<float*, ExecSpace>& dw, const DView<float*, ExecSpace>& db,
                   const DView<const float**, ExecSpace>& dy, const DView<const float**, ExecSpace>& x,
                   const DView<const float*, ExecSpace>& w, const DView<const float*, ExecSpace>& mean,
                   const DView<const float*, ExecSpace>& rstd, bool centered) {
  const int N = static_cast<int>(x.extent(0)), C = static_cast<int>(x.extent(1));
  const bool has_bias = db.extent(0) > 0;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "kformer::norm_backward_dx", Policy(exec, N, Kokkos::AUTO),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank();
        const float mu = centered ? mean(r) : 0.f, rs = rstd(r);
        const float mg = centered ? team_row_sum(team, C, [&](int c) { return dy(r, c) * w(c); }) / C : 0.f;
        const float mgx = team_row_sum(team, C, [&](int c) {
                            return dy(r, c) * w(c) * (x(r, c) - mu) * rs;
                          }) / C;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) {
          const float xhat = (x(r, c) - mu) * rs;
          dx(r, c) = rs * (dy(r, c) * w(c) - mg - xhat * mgx);
        });
      });
  // Parameter gradients: each work item owns L adjacent columns and walks the rows in order
  // (L = 8 on the host for vector lanes over contiguous memory, 1 on a GPU for coalescing).
  constexpr int L = runs_on_host<ExecSpace> ? 8 : 1;
  Kokkos::parallel_for(
      "kformer::norm_backward_dparams", Kokkos::RangePolicy<ExecSpace>(exec, 0, (C + L - 1) / L),
      KOKKOS_LAMBDA(const int blk) {
        const int c0 = blk * L, nl = C - c0 < L ? C - c0 : L;
        float aw[L], ab[L];
        for (int l = 0; l < L; ++l) aw[l] = ab[l] = 0.f;
        for (int r = 0; r < N; ++r) {
          const float mu = centered ? mean(r) : 0.f, rs = rstd(r);
          for (int l = 0; l < nl; ++l) {
            const float g = dy(r, c0 + l);
            aw[l] += g * (x(r, c0 + l) - mu) * rs;
            ab[l] += g;
          }
        }
        for (int l = 0; l < nl; ++l) {
          dw(c0 + l) += aw[l];
          if (has_bias) db(c0 + l) += ab[l];
        }
      });
}

}  // namespace kformer::kernels::detail
