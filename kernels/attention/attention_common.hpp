// What the two causal attention variants (attention_naive.hpp, attention_fused.hpp) share:
// the packed QKV layout, GQA head mapping, scratch sizing and team-level tile helpers.
//
// Layout. qkv (B,T,W), W = (H + 2*KV) * hd: per token the H query heads, then the KV key heads,
// then the KV value heads, each hd wide. This is the output of one QKV projection GEMM; under
// tensor parallelism each rank holds H/tp query heads and KV/tp kv heads, so a rank's QKV weight
// is its own [q heads | k heads | v heads] rows and its GEMM output feeds attention directly.
// out (B,T,H*hd) is the heads side by side, ready for the output projection.
// GQA: query head h reads kv head h / (H/KV) (Hugging Face's repeat_kv order).
// Element types: qkv, out and their gradients are float or bf16 (bf16 mixed precision); tiles,
// scores, softmax statistics and every sum are fp32.
#pragma once

#include "convert.hpp"
#include "fast_exp.hpp"
#include "kokkos_compat.hpp"
#include "view_types.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace kformer::kernels::detail {

struct QkvLayout {
  int H, KV, hd;
  KOKKOS_INLINE_FUNCTION int q_col(int h) const { return h * hd; }
  KOKKOS_INLINE_FUNCTION int k_col(int kvh) const { return (H + kvh) * hd; }
  KOKKOS_INLINE_FUNCTION int v_col(int kvh) const { return (H + KV + kvh) * hd; }
  KOKKOS_INLINE_FUNCTION int kv_of(int h) const { return h / (H / KV); }
};

// Checks the shapes, returns the layout; throws with the cause when they do not fit.
inline QkvLayout make_qkv_layout(std::size_t width, int n_heads, int n_kv_heads) {
  if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0)
    throw std::invalid_argument("attention: n_kv_heads (" + std::to_string(n_kv_heads) +
                                ") must divide n_heads (" + std::to_string(n_heads) + ")");
  const std::size_t heads = std::size_t(n_heads) + 2 * std::size_t(n_kv_heads);
  if (width % heads != 0)
    throw std::invalid_argument("attention: qkv width " + std::to_string(width) +
                                " is not (n_heads + 2*n_kv_heads) * head_dim");
  return QkvLayout{n_heads, n_kv_heads, static_cast<int>(width / heads)};
}

// Fixed large negative in place of -inf: exp(kNegBig - m) is 0 and never NaN.
constexpr float kNegBig = -3.0e38f;

template <class ExecSpace>
using ScratchFloats = Kokkos::View<float*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;

// Team policy with `nfloats` of scratch per team, in level 0 where it fits, else level 1;
// returns the level through `level`. Dynamic schedule: causal tiles differ in cost.
template <class ExecSpace>
Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>> scratch_team_policy(const ExecSpace& exec,
                                                                                    int league, int nfloats,
                                                                                    int& level) {
  using Policy = Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
  const int bytes = static_cast<int>(ScratchFloats<ExecSpace>::shmem_size(nfloats));
  level = bytes <= Policy::scratch_size_max(0) ? 0 : 1;
  return Policy(exec, league, Kokkos::AUTO).set_scratch_size(level, Kokkos::PerTeam(bytes));
}

// The rows a team of the fused kernels owns: batch b, head h (query or kv head), rows
// [r0, r0 + n) of the sequence, decoded from the league index over (batch, head, tile). With
// `longest_first` the tiles at the end of the sequence (the most causal work) come first.
struct Tile {
  int b, h, r0, n;
};
KOKKOS_INLINE_FUNCTION Tile tile_of(int r, int ntiles, int nheads, int edge, int T, bool longest_first) {
  const int t = longest_first ? ntiles - 1 - r % ntiles : r % ntiles;
  const int r0 = t * edge;
  return Tile{r / (ntiles * nheads), (r / ntiles) % nheads, r0, T - r0 < edge ? T - r0 : edge};
}

// The same tiles in the order a GPU wants them, `league` = batch x nheads x ntiles: the tile index
// slowest, so that every (batch, head)'s longest tile comes before any second-longest. A GPU starts
// blocks in league order as slots free, so the longest work starts first and the last wave holds the
// shortest tiles (a causal pass's tiles range from one block's work to ntiles'). The order of
// tile_of (each head's tiles in turn, longest first) left the last heads' longest tiles to start
// last: list-scheduled in league order on 924 slots (132 SMs, 7 blocks each), the 124M step's 3072
// forward tiles end at 1.39 times the ideal, against 1.06 in this order. Host teams keep tile_of's,
// whose consecutive teams share a head's K and V in cache.
KOKKOS_INLINE_FUNCTION Tile gpu_tile_of(int r, int league, int ntiles, int nheads, int edge, int T, bool longest_first) {
  const int groups = league / ntiles;  // (batch, head) pairs
  const int k = r / groups, g = r - k * groups;
  const int t = longest_first ? ntiles - 1 - k : k;
  const int r0 = t * edge;
  return Tile{g / nheads, g % nheads, r0, T - r0 < edge ? T - r0 : edge};
}

// The tile team `team` owns: gpu_tile_of's order on a device, tile_of's on the host.
template <class ExecSpace, class Member>
KOKKOS_INLINE_FUNCTION Tile team_tile(const Member& team, int ntiles, int nheads, int edge, int T, bool longest_first) {
  if constexpr (runs_on_host<ExecSpace>)
    return tile_of(team.league_rank(), ntiles, nheads, edge, T, longest_first);
  else
    return gpu_tile_of(team.league_rank(), team.league_size(), ntiles, nheads, edge, T, longest_first);
}

// Hands out consecutive arrays of a team's scratch.
struct ScratchCarver {
  float* p;
  KOKKOS_INLINE_FUNCTION float* take(int n) {
    float* r = p;
    p += n;
    return r;
  }
};

// Copies rows [r0, r0+n) of the hd-wide head at column c0 of x (B,T,W), times scale, into
// scratch: row-major dst[i*hd + d] and/or transposed dstT[d*ld + i] (either may be null).
template <class Member, class V>
KOKKOS_INLINE_FUNCTION void load_head_rows(const Member& team, const V& x, int b, int r0, int n, int c0, int hd,
                                           float scale, float* dst, float* dstT, int ld) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](const int i) {
    for (int d = 0; d < hd; ++d) {
      const float v = scale * x(b, r0 + i, c0 + d);
      if (dst) dst[i * hd + d] = v;
      if (dstT) dstT[d * ld + i] = v;
    }
  });
}

// s[j] = sum_d a[d] * bT[d*ld + j] for j in [0, n): one row of a tile product, vectorised over j.
KOKKOS_INLINE_FUNCTION void row_times_tile(const float* KOKKOS_RESTRICT a, const float* KOKKOS_RESTRICT bT,
                                           int ld, int hd, int n, float* KOKKOS_RESTRICT s) {
  for (int j = 0; j < n; ++j) s[j] = 0.f;
  for (int d = 0; d < hd; ++d) {
    const float ad = a[d];
    const float* KOKKOS_RESTRICT bd = bT + d * ld;
    for (int j = 0; j < n; ++j) s[j] += ad * bd[j];
  }
}

// o[d] += sum_j w[j] * rows[j*hd + d] for j in [0, n): vectorised over d, rows in order.
KOKKOS_INLINE_FUNCTION void accumulate_rows(const float* KOKKOS_RESTRICT w, const float* KOKKOS_RESTRICT rows,
                                            int hd, int n, float* KOKKOS_RESTRICT o) {
  for (int j = 0; j < n; ++j) {
    const float wj = w[j];
    const float* KOKKOS_RESTRICT r = rows + j * hd;
    for (int d = 0; d < hd; ++d) o[d] += wj * r[d];
  }
}

// out(d) = alpha * sum_{j<n} w(j) * row(j)[d] for d < hd, row(j) a pointer to hd floats. Team
// threads take 8-wide column chunks; each walks j in order, so the sum is deterministic.
template <class Member, class W, class R, class Store>
KOKKOS_INLINE_FUNCTION void team_weighted_rows(const Member& team, int hd, int n, const W& w, const R& row,
                                               float alpha, const Store& store) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, (hd + 7) / 8), [&](const int k) {
    const int d0 = 8 * k, nd = hd - d0 < 8 ? hd - d0 : 8;
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int j = 0; j < n; ++j) {
      const float wj = w(j);
      const auto* r = row(j) + d0;
      for (int l = 0; l < nd; ++l) acc[l] += wj * r[l];
    }
    for (int l = 0; l < nd; ++l) store(d0 + l, alpha * acc[l]);
  });
}

}  // namespace kformer::kernels::detail
