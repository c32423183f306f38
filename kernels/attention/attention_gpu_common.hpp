// What the GPU-shaped fused attention kernels (attention_gpu_forward.hpp, attention_gpu_dq.hpp,
// attention_gpu_dkv.hpp) share: the team policy with an explicit team size and vector length,
// per-lane accumulators that live across team barriers, and staging of rows into scratch.
#pragma once

#include "attention_common.hpp"
#include "attention_tiles.hpp"

namespace kformer::kernels::detail {

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define KFORMER_ATTN_UNROLL _Pragma("unroll")
#else
#define KFORMER_ATTN_UNROLL
#endif

// Accumulators private to (thread g, lane v), kept across team barriers: N floats per lane.
// On a device each hardware thread is one (g, v) -- TeamThreadRange(team, C::team) and
// ThreadVectorRange(team, C::vector) give thread g and lane v their own index in every call
// (Kokkos' CUDA/HIP mapping: threadIdx.y, threadIdx.x) -- so one slot, held in registers. On
// the host one thread plays every (g, v) in turn and needs a slot for each.
template <class ExecSpace, class C, int N>
struct LaneRegs {
  static constexpr int slots = runs_on_host<ExecSpace> ? C::team * C::vector : 1;
  float r[slots][N];
  KOKKOS_INLINE_FUNCTION float* at(int g, int v) { return r[slots == 1 ? 0 : g * C::vector + v]; }
  KOKKOS_INLINE_FUNCTION void zero(int g, int v) {
    float* p = at(g, v);
    KFORMER_ATTN_UNROLL
    for (int i = 0; i < N; ++i) p[i] = 0.f;
  }
};

// Runs f(g, v) once for every (thread g, lane v) of the GPU shape.
template <class C, class Member, class F>
KOKKOS_INLINE_FUNCTION void for_each_lane(const Member& team, const F& f) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, C::team), [&](const int g) {
    Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, C::vector), [&](const int v) { f(g, v); });
  });
}

// Sizes every GPU-shaped pass derives from qkv (B,T,W) and its layout.
template <class C>
struct GpuDims {
  int B, T, hd;
  int hdp;      // head_dim rounded up to whole lane groups: the width staged in scratch
  int ld;       // row stride of the staged K, V, Q, dO tiles
  int tiles;    // tiles of C::BQ rows along the sequence
  float scale;  // 1 / sqrt(head_dim)
  template <class V>
  GpuDims(const V& qkv, const QkvLayout& L)
      : B(static_cast<int>(qkv.extent(0))), T(static_cast<int>(qkv.extent(1))), hd(L.hd),
        hdp((L.hd + C::vector - 1) / C::vector * C::vector), ld(GpuScratch<C>::row_ld(L.hd)),
        tiles((T + C::BQ - 1) / C::BQ), scale(1.f / std::sqrt(static_cast<float>(L.hd))) {}
};

template <class ExecSpace>
using GpuTeam = typename Kokkos::TeamPolicy<ExecSpace>::member_type;

// Runs body(team, tile, scratch) for every tile of C::BQ rows (tile_of) of `nheads` heads, with
// a team of shape C (team x vector) and `nfloats` of scratch, in level 0 where it fits, else
// level 1. A host backend runs as many team threads as it has (one on Serial); the kernels do
// not depend on the team size there. On a device the team must have the C::team threads the
// lane-private accumulators need, which is checked.
template <class C, class ExecSpace, class Body>
void for_each_gpu_tile(const char* label, const ExecSpace& exec, const GpuDims<C>& D, int nheads, bool longest_first,
                       int nfloats, const Body& body) {
  using Policy = Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
  const int bytes = static_cast<int>(ScratchFloats<ExecSpace>::shmem_size(nfloats));
  const int level = bytes <= Policy::scratch_size_max(0) ? 0 : 1;
  int team_size = C::team;
  if (runs_on_host<ExecSpace>) team_size = exec.concurrency() < team_size ? exec.concurrency() : team_size;
  const Policy policy = Policy(exec, D.B * nheads * D.tiles, team_size, C::vector)
                            .set_scratch_size(level, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(const GpuTeam<ExecSpace>& team) {
        if (!runs_on_host<ExecSpace> && team.team_size() != C::team)
          Kokkos::abort("attention: team size is not the tile's");
        const Tile tile = team_tile<ExecSpace>(team, D.tiles, nheads, C::BQ, D.T, longest_first);
        ScratchCarver sc{ScratchFloats<ExecSpace>(team.team_scratch(level), nfloats).data()};
        body(team, tile, sc);
      });
}

// Rows [r0, r0+n) of the hd-wide head at column c0 of x (B,T,W), as fp32, into dst[i*ld + d],
// and zeros in columns [hd, w) (w: hd rounded up to whole lane groups, so that lanes read whole
// groups). Flat over the team's threads and lanes: a warp stores 32 consecutive floats of a row.
template <class Member, class V>
KOKKOS_INLINE_FUNCTION void stage_rows(const Member& team, const V& x, int b, int r0, int n, int c0, int hd, int w,
                                       float* dst, int ld) {
  Kokkos::parallel_for(Kokkos::TeamVectorRange(team, n * w), [&](const int e) {
    const int i = e / w, d = e - i * w;
    dst[i * ld + d] = d < hd ? float(x(b, r0 + i, c0 + d)) : 0.f;
  });
}

// Pointers to hd-wide rows of one head of x (B,T,W), the row index clamped into [0, n) so that
// lanes past the end of a tile read valid memory (their results are masked).
template <int R, class V>
KOKKOS_INLINE_FUNCTION void head_rows(const V& x, int b, int r0, int n, int first, int stride, int c0,
                                      const typename V::value_type* (&rows)[R]) {
  KFORMER_ATTN_UNROLL
  for (int r = 0; r < R; ++r) {
    const int i = first + stride * r;
    rows[r] = &x(b, r0 + (i < n ? i : n - 1), c0);
  }
}

// s[r][c] = sum_d a[r][d] * tile[j_c*ld + d], j_c = v + VL*c (clamped into [0, n)): one lane's
// RM x RN block of a tile product, rows a[r] (any element type, e.g. global memory) against
// rows of a scratch tile. Each sum runs over d in order.
template <int RM, int RN, int VL, class Ptr>
KOKKOS_INLINE_FUNCTION void tile_dots(const Ptr (&a)[RM], const float* tile, int ld, int v, int n, int hd,
                                      float (&s)[RM][RN]) {
  const float* t[RN];
  KFORMER_ATTN_UNROLL
  for (int c = 0; c < RN; ++c) {
    t[c] = tile + (v + VL * c < n ? v + VL * c : n - 1) * ld;
    KFORMER_ATTN_UNROLL
    for (int r = 0; r < RM; ++r) s[r][c] = 0.f;
  }
  for (int d = 0; d < hd; ++d) {
    float x[RM], y[RN];
    KFORMER_ATTN_UNROLL
    for (int r = 0; r < RM; ++r) x[r] = float(a[r][d]);
    KFORMER_ATTN_UNROLL
    for (int c = 0; c < RN; ++c) y[c] = t[c][d];
    KFORMER_ATTN_UNROLL
    for (int r = 0; r < RM; ++r) {
      KFORMER_ATTN_UNROLL
      for (int c = 0; c < RN; ++c) s[r][c] += x[r] * y[c];
    }
  }
}

// acc[r*CM + cc] += sum_{j<n} w[r][j] * tile[j*ld + c0 + v + VL*cc] for the lane's column
// groups of the head_dim chunk [c0, c0 + ncol) (the last group may reach into the zeroed columns
// of stage_rows): weights from a score tile against rows of a scratch tile, j in order.
template <int RM, int CM, int VL>
KOKKOS_INLINE_FUNCTION void accumulate_tile(const float* const (&w)[RM], const float* tile, int ld, int n, int c0,
                                            int v, int ncol, float* acc) {
  const int ncc = (ncol + VL - 1) / VL;
  for (int j = 0; j < n; ++j) {
    const float* t = tile + j * ld + c0 + v;
    float x[RM];
    KFORMER_ATTN_UNROLL
    for (int r = 0; r < RM; ++r) x[r] = w[r][j];
    KFORMER_ATTN_UNROLL
    for (int cc = 0; cc < CM; ++cc) {
      if (cc >= ncc) break;
      const float y = t[VL * cc];
      KFORMER_ATTN_UNROLL
      for (int r = 0; r < RM; ++r) acc[r * CM + cc] += x[r] * y;
    }
  }
}

// store(i, c, acc[r*CM + cc]) for the lane's rows i = g + TS*r < n and head_dim columns
// c = c0 + v + VL*cc < c0 + ncol.
template <int RM, int CM, int VL, int TS, class Store>
KOKKOS_INLINE_FUNCTION void store_tile(const float* acc, int g, int v, int n, int c0, int ncol, const Store& store) {
  KFORMER_ATTN_UNROLL
  for (int r = 0; r < RM; ++r) {
    if (g + TS * r >= n) break;
    KFORMER_ATTN_UNROLL
    for (int cc = 0; cc < CM; ++cc) {
      if (v + VL * cc >= ncol) break;
      store(g + TS * r, c0 + v + VL * cc, acc[r * CM + cc]);
    }
  }
}

}  // namespace kformer::kernels::detail
