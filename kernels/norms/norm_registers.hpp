// The norms' GPU shape with each row held in registers: thread t of a row's team loads channels
// t, t + ts, t + 2 ts, ... (V of them; a warp's loads coalesce) all at once, then reduces and
// writes from those registers. The loop it replaces (team_row_sum) issued one load per iteration
// and waited for it, and read the row again for each sum: an H200 ran LayerNorm at 0.15-0.36 of
// the copy in fp32 and 0.14-0.20 in bf16 that way (docs/PERFORMANCE.md, session 13's run 1),
// where the lanes' several loads in flight had lifted the streaming kernels to 0.7-0.9.
//
// V is a template argument (registers need a compile-time count): the power of two at or above
// C / ts, up to kNormMaxPerThread; a row wider than that keeps the loop (normalization.hpp).
// On the host the team is one thread, so the kernel tests run this path for C <= 32 there.
//
// Sums: each thread adds its V values in order, then the team reduce combines the threads in its
// fixed tree: a grouping fixed by C and the team size, so the backward stays bitwise reproducible.
#pragma once

#include "kokkos_compat.hpp"
#include "view_types.hpp"

namespace kformer::kernels::detail {

// 32: the backward holds 2V floats a thread, and a 256-thread team must fit an SM's registers
// (C up to 8192 at 256 threads; wider rows take the loop).
constexpr int kNormMaxPerThread = 32;

// Channels per thread for a team of ts threads over C channels (a power of two), or 0 when the
// row is too wide to hold.
constexpr int norm_per_thread(int C, int ts) {
  const int need = (C + ts - 1) / ts;
  int v = 1;
  while (v < need) v *= 2;
  return v <= kNormMaxPerThread ? v : 0;
}

// The sum over the team of each thread's `mine`, the same value returned to every thread.
template <class Member>
KOKKOS_INLINE_FUNCTION float team_total(const Member& team, float mine) {
  float s = mine;
  team.team_reduce(Kokkos::Sum<float>(s));
  return s;
}

// out (N,C) = (x - mu) * rstd * w (+ b) with a team of ts threads per row; as norm_forward.
template <int V, class ExecSpace, class OutView, class XView>
void norm_forward_registers(const ExecSpace& exec, int ts, const OutView& out,
                            const DView<float*, ExecSpace>& mean, const DView<float*, ExecSpace>& rstd,
                            const XView& x, const DView<const float*, ExecSpace>& w,
                            const DView<const float*, ExecSpace>& b, float eps, bool centered) {
  const int N = static_cast<int>(x.extent(0)), C = static_cast<int>(x.extent(1));
  using TO = elem_t<OutView>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const bool has_bias = b.extent(0) > 0;
  Kokkos::parallel_for(
      "kformer::norm_forward", Policy(exec, N, ts), KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank(), t = team.team_rank(), n = team.team_size();
        float v[V];
        for (int j = 0; j < V; ++j) v[j] = t + j * n < C ? float(x(r, t + j * n)) : 0.f;
        float s = 0.f;
        for (int j = 0; j < V; ++j) s += v[j];
        const float mu = centered ? team_total(team, s) / C : 0.f;
        float q = 0.f;
        for (int j = 0; j < V; ++j) q += t + j * n < C ? (v[j] - mu) * (v[j] - mu) : 0.f;
        const float rs = 1.f / kmath::sqrt(team_total(team, q) / C + eps);
        for (int j = 0; j < V; ++j) {
          const int c = t + j * n;
          if (c < C) out(r, c) = TO((v[j] - mu) * rs * w(c) + (has_bias ? b(c) : 0.f));
        }
        if (t == 0) {
          if (centered) mean(r) = mu;
          rstd(r) = rs;
        }
      });
}

// dx (N,C) = rstd * (g - mean(g) [centred] - xhat * mean(g * xhat)), g = dy * w, with a team of
// ts threads per row holding g and xhat; as norm_row_dx.
template <int V, class ExecSpace, class DxView, class DyView, class XView>
void norm_dx_registers(const ExecSpace& exec, int ts, const DxView& dx, const DyView& dy, const XView& x,
                       const DView<const float*, ExecSpace>& w, const DView<const float*, ExecSpace>& mean,
                       const DView<const float*, ExecSpace>& rstd, bool centered) {
  const int N = static_cast<int>(x.extent(0)), C = static_cast<int>(x.extent(1));
  using TDX = elem_t<DxView>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "kformer::norm_backward", Policy(exec, N, ts), KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank(), t = team.team_rank(), n = team.team_size();
        const float mu = centered ? mean(r) : 0.f, rs = rstd(r);
        float g[V], xh[V];
        for (int j = 0; j < V; ++j) {
          const int c = t + j * n;
          g[j] = c < C ? float(dy(r, c)) * w(c) : 0.f;
          xh[j] = c < C ? (float(x(r, c)) - mu) * rs : 0.f;
        }
        float sg = 0.f, sgx = 0.f;
        for (int j = 0; j < V; ++j) {
          sg += g[j];
          sgx += g[j] * xh[j];
        }
        const float mg = centered ? team_total(team, sg) / C : 0.f;
        const float mgx = team_total(team, sgx) / C;
        for (int j = 0; j < V; ++j) {
          const int c = t + j * n;
          if (c < C) dx(r, c) = TDX(rs * (g[j] - mg - xh[j] * mgx));
        }
      });
}

// Calls run(std::integral_constant<int, V>) for V = v (a power of two up to kNormMaxPerThread).
template <class Run>
void with_per_thread(int v, const Run& run) {
  switch (v) {
    case 1: return run(std::integral_constant<int, 1>());
    case 2: return run(std::integral_constant<int, 2>());
    case 4: return run(std::integral_constant<int, 4>());
    case 8: return run(std::integral_constant<int, 8>());
    case 16: return run(std::integral_constant<int, 16>());
    default: return run(std::integral_constant<int, kNormMaxPerThread>());
  }
}

}  // namespace kformer::kernels::detail
