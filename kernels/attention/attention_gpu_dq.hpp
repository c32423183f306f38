// dQ pass of the fused attention backward in the FlashAttention-2 shape for GPUs (configuration
// C; see attention_fused_backward.hpp for the two-pass scheme). One team per (batch, query head,
// BQ query rows) streams the key tiles up to the diagonal; dQ accumulates in lane-private
// registers. Per key tile, with thread g / lane v owning rows g + team*r:
//   1. stage V; dP = dO V^T (keys v + vector*c; dO read through the L1 cache) into the dS tile;
//   2. stage K; S = scale * Q K^T, P = exp(S - lse), dS = P (dP - delta), 0 where masked;
//   3. dQ += dS K (columns v + vector*c of head_dim), keys in order.
#pragma once

#include "attention_gpu_common.hpp"

namespace kformer::kernels::detail {

// The q columns of dqkv (B,T,(H+2KV)*hd) from dout (B,T,H*hd), qkv, lse and delta (B,H,T).
template <class C, class ExecSpace, class DqkvView, class DoutView, class QkvView>
void attention_gpu_dq(const ExecSpace& exec, const DqkvView& dqkv, const DoutView& dout, const QkvView& qkv,
                      const DView<const float***, ExecSpace>& lse, const DView<const float***, ExecSpace>& delta,
                      const QkvLayout& L) {
  static_assert(valid_gpu_tile<C>(), "attention: invalid GPU tile configuration");
  using TD = elem_t<DqkvView>;
  using TQ = typename QkvView::value_type;
  using TO = typename DoutView::value_type;
  constexpr int TS = C::team, VL = C::vector, BQ = C::BQ, BK = C::BK;
  constexpr int RM = BQ / TS, RN = BK / VL, CM = C::hd_chunk / VL;
  const GpuDims<C> D(qkv, L);
  const int H = L.H, hd = D.hd, hdp = D.hdp, ld = D.ld, lds = BK + C::pad_tile;
  const float scale = D.scale;
  for_each_gpu_tile<C>(
      "kformer::attention_fused_dq", exec, D, H, true, GpuScratch<C>::dq(hd),
      KOKKOS_LAMBDA(const GpuTeam<ExecSpace>& team, const Tile& tile, ScratchCarver& sc) {
        const int b = tile.b, h = tile.h, q0 = tile.r0, nq = tile.n;
        float* KV = sc.take(BK * ld);  // V, then K, of the current key tile
        float* dS = sc.take(BQ * lds);  // dP, then dS
        const int kc = L.k_col(L.kv_of(h)), vc = L.v_col(L.kv_of(h)), qc = L.q_col(h);
        for (int c0 = 0; c0 < hd; c0 += C::hd_chunk) {
          const int ncol = hd - c0 < C::hd_chunk ? hd - c0 : C::hd_chunk;
          LaneRegs<ExecSpace, C, RM * CM> dQ;
          for_each_lane<C>(team, [&](int g, int v) { dQ.zero(g, v); });
          for (int k0 = 0; k0 < q0 + nq; k0 += BK) {
            const int nk = q0 + nq - k0 < BK ? q0 + nq - k0 : BK;
            team.team_barrier();  // the previous tile's K and dS are no longer read
            stage_rows(team, qkv, b, k0, nk, vc, hd, hdp, KV, ld);
            team.team_barrier();
            for_each_lane<C>(team, [&](int g, int v) {
              const TO* a[RM];
              head_rows(dout, b, q0, nq, g, TS, h * hd, a);
              float dp[RM][RN];
              tile_dots<RM, RN, VL>(a, KV, ld, v, nk, hd, dp);
              KFORMER_ATTN_UNROLL
              for (int r = 0; r < RM; ++r) {
                KFORMER_ATTN_UNROLL
                for (int c = 0; c < RN; ++c) dS[(g + TS * r) * lds + v + VL * c] = dp[r][c];
              }
            });
            team.team_barrier();
            stage_rows(team, qkv, b, k0, nk, kc, hd, hdp, KV, ld);
            team.team_barrier();
            for_each_lane<C>(team, [&](int g, int v) {
              const TQ* a[RM];
              head_rows(qkv, b, q0, nq, g, TS, qc, a);
              float s[RM][RN];
              tile_dots<RM, RN, VL>(a, KV, ld, v, nk, hd, s);
              KFORMER_ATTN_UNROLL
              for (int r = 0; r < RM; ++r) {
                const int i = g + TS * r, ic = i < nq ? i : nq - 1;
                const float li = lse(b, h, q0 + ic), di = delta(b, h, q0 + ic);
                KFORMER_ATTN_UNROLL
                for (int c = 0; c < RN; ++c) {
                  const int j = v + VL * c;
                  float& e = dS[i * lds + j];
                  const bool seen = i < nq && j < nk && k0 + j <= q0 + i;
                  e = seen ? fast_exp(scale * s[r][c] - li) * (e - di) : 0.f;
                }
              }
            });
            team.team_barrier();
            for_each_lane<C>(team, [&](int g, int v) {
              const float* w[RM];
              KFORMER_ATTN_UNROLL
              for (int r = 0; r < RM; ++r) w[r] = dS + (g + TS * r) * lds;
              accumulate_tile<RM, CM, VL>(w, KV, ld, nk, c0, v, ncol, dQ.at(g, v));
            });
          }
          for_each_lane<C>(team, [&](int g, int v) {
            store_tile<RM, CM, VL, TS>(dQ.at(g, v), g, v, nq, c0, ncol,
                                       [&](int i, int c, float x) { dqkv(b, q0 + i, qc + c) = TD(scale * x); });
          });
        }
      });
}

}  // namespace kformer::kernels::detail
