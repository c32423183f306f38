// The norms' GPU shape with each row held in registers: thread t of a row's team loads its blocks
// of channels, t, t + ts, t + 2 ts, ... (V of them; a warp's loads coalesce) all at once, then
// reduces and writes from those registers. The loop it replaces (team_row_sum) issued one load per
// iteration and waited for it, and read the row again for each sum: an H200 ran LayerNorm at
// 0.15-0.36 of the copy in fp32 and 0.14-0.20 in bf16 that way (docs/PERFORMANCE.md, session 13's
// run 1), where the lanes' several loads in flight had lifted the streaming kernels to 0.7-0.9.
//
// A block is P channels: kNormRun (8) contiguous ones, read and written in 16-byte words
// (run_access.hpp), where every row of the views starts 16-byte aligned and C is a multiple of 8;
// else one channel. One channel a block left the bf16 norms at 2-byte loads (499 GB/s on an H200
// in the 124M step against 893 in fp32, session 50), the remedy docs/PERFORMANCE.md names. P is
// the same for float and bf16 views, so a bf16 row and its fp32 twin sum in the same order.
//
// V is a template argument (registers need a compile-time count): the power of two at or above
// C / (ts P), with V P up to kNormMaxPerThread; a row wider than that keeps the loop
// (normalization.hpp). On the host the team is one thread, so the kernel tests run this path for
// C <= 32 there.
//
// Sums: each thread adds its V P values in order, then the team reduce combines the threads in
// its fixed tree: a grouping fixed by C, P and the team size, so the backward stays bitwise
// reproducible.
#pragma once

#include "kokkos_compat.hpp"
#include "run_access.hpp"
#include "view_types.hpp"

namespace kformer::kernels::detail {

// 32: the backward holds 2 V P floats a thread, and a 256-thread team must fit an SM's registers
// (C up to 8192 at 256 threads; wider rows take the loop).
constexpr int kNormMaxPerThread = 32;
// Channels a block where the views allow runs (run_access.hpp): 16 bytes of bf16, two words of fp32.
constexpr int kNormRun = 8;

// Blocks per thread (a power of two) for a team of ts threads over C channels in blocks of P, or 0
// when the row is too wide to hold.
constexpr int norm_per_thread(int C, int ts, int P = 1) {
  const int need = (C + ts * P - 1) / (ts * P);
  int v = 1;
  while (v < need) v *= 2;
  return v * P <= kNormMaxPerThread ? v : 0;
}

// The block size the views allow: kNormRun where every one of them can be read in runs of it.
template <class... Views>
int norm_block(const Views&... v) {
  return (runs_fit<kNormRun>(v) && ...) ? kNormRun : 1;
}

// The sum over the team of each thread's `mine`, the same value returned to every thread.
template <class Member>
KOKKOS_INLINE_FUNCTION float team_total(const Member& team, float mine) {
  float s = mine;
  team.team_reduce(Kokkos::Sum<float>(s));
  return s;
}

// out (N,C) = (x - mu) * rstd * w (+ b) with a team of ts threads per row, V blocks of P channels
// a thread; as norm_forward.
template <int V, int P, class ExecSpace, class OutView, class XView>
void norm_forward_registers(const ExecSpace& exec, int ts, const OutView& out,
                            const DView<float*, ExecSpace>& mean, const DView<float*, ExecSpace>& rstd,
                            const XView& x, const DView<const float*, ExecSpace>& w,
                            const DView<const float*, ExecSpace>& b, float eps, bool centered) {
  const int N = static_cast<int>(x.extent(0)), C = static_cast<int>(x.extent(1));
  // Row and column strides (a column stride is 1 wherever P > 1: runs_fit).
  const std::int64_t xs = x.stride(0), xc = x.stride(1), os = out.stride(0), oc = out.stride(1);
  using TO = elem_t<OutView>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const bool has_bias = b.extent(0) > 0;
  const auto* xp = x.data();
  TO* op = out.data();
  const float* wp = w.data();
  const float* bp = b.data();
  Kokkos::parallel_for(
      "kformer::norm_forward", Policy(exec, N, ts), KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank(), t = team.team_rank(), n = team.team_size();
        const auto* xr = xp + r * xs;
        float v[V * P];
        for (int j = 0; j < V; ++j) {
          const int c = (t + j * n) * P;
          if (c < C)
            load_run<P>(v + j * P, xr + c * xc);
          else
            for (int p = 0; p < P; ++p) v[j * P + p] = 0.f;
        }
        float s = 0.f;
        for (int i = 0; i < V * P; ++i) s += v[i];
        const float mu = centered ? team_total(team, s) / C : 0.f;
        float q = 0.f;
        for (int j = 0; j < V; ++j)
          for (int p = 0; p < P; ++p) q += (t + j * n) * P < C ? (v[j * P + p] - mu) * (v[j * P + p] - mu) : 0.f;
        const float rs = 1.f / kmath::sqrt(team_total(team, q) / C + eps);
        for (int j = 0; j < V; ++j) {
          const int c = (t + j * n) * P;
          if (c >= C) continue;
          float wv[P], bv[P], y[P];
          load_run<P>(wv, wp + c);
          if (has_bias)
            load_run<P>(bv, bp + c);
          else
            for (int p = 0; p < P; ++p) bv[p] = 0.f;
          for (int p = 0; p < P; ++p) y[p] = (v[j * P + p] - mu) * rs * wv[p] + bv[p];
          store_run<P>(op + r * os + c * oc, y);
        }
        if (t == 0) {
          if (centered) mean(r) = mu;
          rstd(r) = rs;
        }
      });
}

// dx (N,C) = rstd * (g - mean(g) [centred] - xhat * mean(g * xhat)), g = dy * w, with a team of
// ts threads per row holding g and xhat, V blocks of P channels a thread; as norm_row_dx.
template <int V, int P, class ExecSpace, class DxView, class DyView, class XView>
void norm_dx_registers(const ExecSpace& exec, int ts, const DxView& dx, const DyView& dy, const XView& x,
                       const DView<const float*, ExecSpace>& w, const DView<const float*, ExecSpace>& mean,
                       const DView<const float*, ExecSpace>& rstd, bool centered) {
  const int N = static_cast<int>(x.extent(0)), C = static_cast<int>(x.extent(1));
  const std::int64_t xs = x.stride(0), xc = x.stride(1), ys = dy.stride(0), yc = dy.stride(1);
  const std::int64_t ds = dx.stride(0), dc = dx.stride(1);
  using TDX = elem_t<DxView>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const auto* xp = x.data();
  const auto* yp = dy.data();
  TDX* dp = dx.data();
  const float* wp = w.data();
  Kokkos::parallel_for(
      "kformer::norm_backward", Policy(exec, N, ts), KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank(), t = team.team_rank(), n = team.team_size();
        const float mu = centered ? mean(r) : 0.f, rs = rstd(r);
        float g[V * P], xh[V * P];
        for (int j = 0; j < V; ++j) {
          const int c = (t + j * n) * P;
          if (c < C) {
            float wv[P];
            load_run<P>(g + j * P, yp + r * ys + c * yc);
            load_run<P>(xh + j * P, xp + r * xs + c * xc);
            load_run<P>(wv, wp + c);
            for (int p = 0; p < P; ++p) {
              g[j * P + p] *= wv[p];
              xh[j * P + p] = (xh[j * P + p] - mu) * rs;
            }
          } else {
            for (int p = 0; p < P; ++p) g[j * P + p] = xh[j * P + p] = 0.f;
          }
        }
        float sg = 0.f, sgx = 0.f;
        for (int i = 0; i < V * P; ++i) {
          sg += g[i];
          sgx += g[i] * xh[i];
        }
        const float mg = centered ? team_total(team, sg) / C : 0.f;
        const float mgx = team_total(team, sgx) / C;
        for (int j = 0; j < V; ++j) {
          const int c = (t + j * n) * P;
          if (c >= C) continue;
          float d[P];
          for (int p = 0; p < P; ++p) d[p] = rs * (g[j * P + p] - mg - xh[j * P + p] * mgx);
          store_run<P>(dp + r * ds + c * dc, d);
        }
      });
}

// Calls run(std::integral_constant<int, V>, std::integral_constant<int, P>) for V = v blocks of
// P = p channels (p 1 or kNormRun; v a power of two with v p up to kNormMaxPerThread).
template <class Run>
void with_per_thread(int v, int p, const Run& run) {
  using std::integral_constant;
  if (p == kNormRun) {
    switch (v) {
      case 1: return run(integral_constant<int, 1>(), integral_constant<int, kNormRun>());
      case 2: return run(integral_constant<int, 2>(), integral_constant<int, kNormRun>());
      default: return run(integral_constant<int, kNormMaxPerThread / kNormRun>(), integral_constant<int, kNormRun>());
    }
  }
  switch (v) {
    case 1: return run(integral_constant<int, 1>(), integral_constant<int, 1>());
    case 2: return run(integral_constant<int, 2>(), integral_constant<int, 1>());
    case 4: return run(integral_constant<int, 4>(), integral_constant<int, 1>());
    case 8: return run(integral_constant<int, 8>(), integral_constant<int, 1>());
    case 16: return run(integral_constant<int, 16>(), integral_constant<int, 1>());
    default: return run(integral_constant<int, kNormMaxPerThread>(), integral_constant<int, 1>());
  }
}

}  // namespace kformer::kernels::detail
