// The row normalisation shared by LayerNorm (centred, with bias) and RMSNorm (not centred, no
// bias): one implementation, so the two cannot drift apart. Public entry points are in
// layernorm.hpp and rmsnorm.hpp. Rows are tokens: N = B*T rows of C channels.
//
// Element types: x, out, dy and dx may each be float or bf16 (the views' own types); every sum,
// mean, rstd and parameter gradient is fp32, so bf16 inputs are normalised in fp32.
//
// Determinism: every sum has a fixed grouping (row sums as team_reduce.hpp says; weight/bias
// gradients as fixed blocks of rows, then per-column loops over the blocks in order), so the
// backward is bitwise reproducible run to run; there are no atomics.
//
// Work shape (work_shape.hpp): rows are teams, columns the team's threads, so on a GPU
// consecutive threads touch consecutive channels. The host shape gives a team (one thread) 16
// rows in the forward and 32 in the backward, and the backward adds its parameter gradients in
// the same pass. The GPU shape gives a team of gpu_row_team(C) threads one row, held in their
// registers (norm_registers.hpp) unless it is too wide, and the backward's parameter gradients
// are a pass of their own, a thread per (block of rows, column).
#pragma once

#include "convert.hpp"
#include "kept_buffer.hpp"
#include "kokkos_compat.hpp"
#include "norm_registers.hpp"
#include "ordered_sum.hpp"
#include "team_reduce.hpp"
#include "view_types.hpp"


namespace kformer::kernels::detail {

struct NormPartials {};  // the tag of the backward's kept buffer

// Threads per row team in the GPU shape: C/8 rounded down to a power of two (Kokkos' team
// reductions need one), within [32, 256]. Kokkos::AUTO picks the smallest team that fills an SM
// (64 threads with Kokkos 3.4 on sm_80 and sm_90) whatever the row: on an H100 that left the
// 256x4096 backward at 0.005 of the copy bandwidth (32 teams of 64 threads) and its forward at
// 0.07, where 256 threads gave 0.18 and 0.20; at C = 768, 64 threads ran the forward at 0.34 of
// the copy and 256 at 0.23 (more warps to join in each row reduction, 3 channels a thread). The
// rule gives each of those shapes the better of the two measured (64 at C = 768, 256 at 4096);
// the host keeps AUTO (one thread per team on OpenMP).
constexpr int gpu_row_team(int C) {
  int t = 32;
  while (t < 256 && 2 * t <= C / 8) t *= 2;
  return t;
}

// The threads of a row team in the GPU shape: gpu_row_team(C) on a GPU, one on the host.
template <class ExecSpace>
constexpr int gpu_shape_team(int C) {
  return runs_on_host<ExecSpace> ? 1 : gpu_row_team(C);
}

// `league` teams over rows of C channels.
template <class ExecSpace>
Kokkos::TeamPolicy<ExecSpace> row_teams(const ExecSpace& exec, int league, int C) {
  if constexpr (runs_on_host<ExecSpace>)
    return Kokkos::TeamPolicy<ExecSpace>(exec, league, Kokkos::AUTO);
  else
    return Kokkos::TeamPolicy<ExecSpace>(exec, league, gpu_row_team(C));
}

// out (N,C) = (x - mu) * rstd * w (+ b); mu = mean of the row when `centered`, else 0;
// rstd = 1 / sqrt(mean((x - mu)^2) + eps). Saves mean (N) when centred, rstd (N) always.
template <Shape S0, class ExecSpace, class OutView, class XView>
void norm_forward(const ExecSpace& exec, const OutView& out,
                  const DView<float*, ExecSpace>& mean, const DView<float*, ExecSpace>& rstd,
                  const XView& x, const DView<const float*, ExecSpace>& w,
                  const DView<const float*, ExecSpace>& b, float eps, bool centered) {
  const int N = static_cast<int>(x.extent(0)), C = static_cast<int>(x.extent(1));
  using TO = elem_t<OutView>;
  using TX = elem_t<XView>;
  const bool has_bias = b.extent(0) > 0;
  // Rows per team: one on a GPU (the team's threads share the row); a block on the host, where
  // a team is one thread and a team per row cost about as much in scheduling as the row's work.
  constexpr Shape S = shape_for<S0, ExecSpace>;
  if constexpr (S == Shape::gpu) {
    const int ts = gpu_shape_team<ExecSpace>(C);
    const int p = norm_block(out, x, w, b), v = norm_per_thread(C, ts, p);  // an empty b fits any run
    if (v > 0)
      return with_per_thread(v, p, [&](auto V, auto P) {
        norm_forward_registers<decltype(V)::value, decltype(P)::value>(exec, ts, out, mean, rstd, x, w, b, eps,
                                                                         centered);
      });
  }
  constexpr int RB = S == Shape::host ? 16 : 1;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "kformer::norm_forward", row_teams(exec, (N + RB - 1) / RB, C),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r0 = team.league_rank() * RB, r1 = r0 + RB < N ? r0 + RB : N;
        for (int r = r0; r < r1; ++r) {
          // Raw row pointers: a store through a view may alias the views' own members in the
          // compiler's eyes, which keeps it from vectorising the loops.
          const TX* KOKKOS_RESTRICT xr = &x(r, 0);
          const float* KOKKOS_RESTRICT wp = w.data();
          const float* KOKKOS_RESTRICT bp = b.data();
          TO* KOKKOS_RESTRICT yr = &out(r, 0);
          const float mu = centered ? team_row_sum<S>(team, C, [&](int c) { return xr[c]; }) / C : 0.f;
          const float var = team_row_sum<S>(team, C, [&](int c) { return (xr[c] - mu) * (xr[c] - mu); }) / C;
          const float rs = 1.f / kmath::sqrt(var + eps);
          if (has_bias) {
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C),
                                 [&](int c) { yr[c] = TO((xr[c] - mu) * rs * wp[c] + bp[c]); });
          } else {
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) { yr[c] = TO((xr[c] - mu) * rs * wp[c]); });
          }
          Kokkos::single(Kokkos::PerTeam(team), [&]() {
            if (centered) mean(r) = mu;
            rstd(r) = rs;
          });
        }
      });
}

// Partial column sums of the parameter gradients, in blocks of kRows rows: part(k, c) and
// part(k, C + c) for block k (a buffer kept between calls: no allocation inside a training step).
constexpr int kNormRows = 32;
// The bytes of those partials for x (N, C): the buffer the backward keeps.
inline double norm_partials_bytes(std::int64_t N, std::int64_t C) {
  return 4.0 * double((N + kNormRows - 1) / kNormRows) * 2.0 * double(C);
}
template <class ExecSpace>
auto norm_partials(int nchunk, int C) {
  const auto kept = kept_buffer<NormPartials, float, typename ExecSpace::memory_space>(std::size_t(nchunk) * 2 * C,
                                                                                   "kformer::norm_dparams");
  return Kokkos::View<float**, Kokkos::LayoutRight, typename ExecSpace::memory_space,
                      Kokkos::MemoryTraits<Kokkos::Unmanaged>>(kept.data(), nchunk, 2 * C);
}

// dw (C) += the blocks' partials of dy * xhat, db (C) += those of dy (when db is not empty), each
// column's blocks added in order, several loaded at a time (ordered_sum.hpp: C threads, each
// walking N / kNormRows partials, would otherwise wait a memory latency for each).
template <class ExecSpace, class Part>
void norm_add_partials(const ExecSpace& exec, const Part& part, const DView<float*, ExecSpace>& dw,
                       const DView<float*, ExecSpace>& db) {
  const int nchunk = static_cast<int>(part.extent(0)), C = static_cast<int>(part.extent(1)) / 2;
  const bool has_bias = db.extent(0) > 0;
  Kokkos::parallel_for(
      "kformer::norm_backward_dparams", Kokkos::RangePolicy<ExecSpace>(exec, 0, C), KOKKOS_LAMBDA(const int c) {
        float sw = 0.f, sb = 0.f;
        add_pairs_in_order(sw, sb, nchunk, [&](int k, float& a, float& b) {
          a = part(k, c);
          b = part(k, C + c);
        });
        dw(c) += sw;
        if (has_bias) db(c) += sb;
      });
}

// dx of row r from its g = dy * w and xhat: the formula of norm_backward, for a team's row.
template <Shape S, class Member, class TDX, class TDY, class TX>
KOKKOS_INLINE_FUNCTION void norm_row_dx(const Member& team, int C, TDX* KOKKOS_RESTRICT dxr,
                                        const TDY* KOKKOS_RESTRICT gr, const TX* KOKKOS_RESTRICT xr,
                                        const float* KOKKOS_RESTRICT wp, float mu, float rs, bool centered) {
  const float mg = centered ? team_row_sum<S>(team, C, [&](int c) { return gr[c] * wp[c]; }) / C : 0.f;
  const float mgx = team_row_sum<S>(team, C, [&](int c) { return gr[c] * wp[c] * (xr[c] - mu) * rs; }) / C;
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C),
                       [&](int c) { dxr[c] = TDX(rs * (gr[c] * wp[c] - mg - (xr[c] - mu) * rs * mgx)); });
}

// dx (N,C) = rstd * (g - mean(g) [centred only] - xhat * mean(g * xhat)), g = dy * w;
// dw (C) += sum over rows of dy * xhat; db (C) += sum over rows of dy (when db is not empty):
// parameter gradients accumulate over micro-batches, as the GEMM's do.
//
// Parameter gradients in two steps with a fixed partition, so that they are bitwise
// reproducible: partial column sums over blocks of kRows consecutive rows, then one work item per
// column adds the blocks in order. Walking a column over all rows instead strides by C floats
// per row, which no prefetcher follows. Host shape: a team (one thread) owns a block, streams
// its rows in order for dx and adds each into its partials. GPU shape: dx is a team per row, and
// the partials a pass of their own, a thread per (block, column), so that a warp reads 32
// consecutive channels of a row.
template <Shape S0, class ExecSpace, class DxView, class DyView, class XView>
void norm_backward(const ExecSpace& exec, const DxView& dx,
                   const DView<float*, ExecSpace>& dw, const DView<float*, ExecSpace>& db,
                   const DyView& dy, const XView& x,
                   const DView<const float*, ExecSpace>& w, const DView<const float*, ExecSpace>& mean,
                   const DView<const float*, ExecSpace>& rstd, bool centered) {
  const int N = static_cast<int>(x.extent(0)), C = static_cast<int>(x.extent(1));
  using TDX = elem_t<DxView>;
  using TDY = elem_t<DyView>;
  using TX = elem_t<XView>;
  constexpr Shape S = shape_for<S0, ExecSpace>;
  constexpr int kRows = kNormRows;
  const int nchunk = (N + kRows - 1) / kRows;
  const auto part = norm_partials<ExecSpace>(nchunk, C);
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  if constexpr (S == Shape::host) {
    Kokkos::parallel_for(
        "kformer::norm_backward", row_teams(exec, nchunk, C), KOKKOS_LAMBDA(const Member& team) {
          const int k = team.league_rank(), r0 = k * kRows, r1 = r0 + kRows < N ? r0 + kRows : N;
          float* KOKKOS_RESTRICT pw = &part(k, 0);
          float* KOKKOS_RESTRICT pb = &part(k, C);
          // Zeroed with the same thread-to-column mapping as the sums below, so that each thread
          // only ever touches its own columns (one range over 2C would hand pb[c] to another
          // thread when C is not a multiple of the team size, with no barrier between the two).
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) { pw[c] = 0.f; });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) { pb[c] = 0.f; });
          for (int r = r0; r < r1; ++r) {
            // Raw row pointers and separate loops, each with few enough pointers for the
            // compiler's alias checks, so that each vectorises. Each thread keeps its columns
            // from row to row: no barrier needed.
            const float mu = centered ? mean(r) : 0.f, rs = rstd(r);
            const TX* KOKKOS_RESTRICT xr = &x(r, 0);
            const TDY* KOKKOS_RESTRICT gr = &dy(r, 0);
            norm_row_dx<S>(team, C, &dx(r, 0), gr, xr, w.data(), mu, rs, centered);
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) { pw[c] += gr[c] * (xr[c] - mu) * rs; });
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C), [&](int c) { pb[c] += gr[c]; });
          }
        });
  } else {
    const int ts = gpu_shape_team<ExecSpace>(C), p = norm_block(dx, dy, x, w), v = norm_per_thread(C, ts, p);
    if (v > 0)
      with_per_thread(v, p, [&](auto V, auto P) {
        norm_dx_registers<decltype(V)::value, decltype(P)::value>(exec, ts, dx, dy, x, w, mean, rstd, centered);
      });
    else
      Kokkos::parallel_for(
          "kformer::norm_backward", row_teams(exec, N, C), KOKKOS_LAMBDA(const Member& team) {
            const int r = team.league_rank();
            norm_row_dx<S>(team, C, &dx(r, 0), &dy(r, 0), &x(r, 0), w.data(), centered ? mean(r) : 0.f,
                           rstd(r), centered);
          });
    Kokkos::parallel_for(
        "kformer::norm_backward_partials", Kokkos::RangePolicy<ExecSpace>(exec, 0, nchunk * C),
        KOKKOS_LAMBDA(const int i) {
          const int k = i / C, c = i - k * C, r0 = k * kRows, r1 = r0 + kRows < N ? r0 + kRows : N;
          float sw = 0.f, sb = 0.f;
          add_pairs_in_order(sw, sb, r1 - r0, [&](int j, float& a, float& b) {
            const int r = r0 + j;
            const float g = dy(r, c);
            a = g * (x(r, c) - (centered ? mean(r) : 0.f)) * rstd(r);
            b = g;
          });
          part(k, c) = sw;
          part(k, C + c) = sb;
        });
  }
  norm_add_partials(exec, part, dw, db);
}

}  // namespace kformer::kernels::detail
