// dK/dV pass of the fused attention backward in the FlashAttention-2 shape for GPUs
// (configuration C; see attention_fused_backward.hpp for the two-pass scheme). One team per
// (batch, kv head, BQ key rows) streams, for each query head of the group in turn, the query
// tiles (BQS rows) at or below the diagonal; dK and dV accumulate in lane-private registers.
// Per query tile, with thread g / lane v owning key rows g + team*r:
//   1. stage Q and dO (BQS, hd) in scratch;
//   2. S^T = scale * K Q^T and dP^T = V dO^T (queries v + vector*c; K, V read through the L1
//      cache), P^T = exp(S^T - lse), dS^T = P^T (dP^T - delta), 0 where masked, into scratch;
//   3. dV += P^T dO, dK += dS^T Q (columns v + vector*c of head_dim), queries in order.
#pragma once

#include "attention_gpu_common.hpp"

namespace kformer::kernels::detail {

// The k and v columns of dqkv (B,T,(H+2KV)*hd) from dout (B,T,H*hd), qkv, lse and delta (B,H,T).
template <class C, class ExecSpace, class DqkvView, class DoutView, class QkvView>
void attention_gpu_dkv(const ExecSpace& exec, const DqkvView& dqkv, const DoutView& dout, const QkvView& qkv,
                       const DView<const float***, ExecSpace>& lse, const DView<const float***, ExecSpace>& delta,
                       const QkvLayout& L) {
  static_assert(valid_gpu_tile<C>(), "attention: invalid GPU tile configuration");
  using TD = elem_t<DqkvView>;
  using TQ = typename QkvView::value_type;
  constexpr int TS = C::team, VL = C::vector, BQ = C::BQ, BS = C::BQS;
  constexpr int RM = BQ / TS, RN = BS / VL, CM = C::hd_chunk / VL;
  const GpuDims<C> D(qkv, L);
  const int KV = L.KV, G = L.H / L.KV, T = D.T, hd = D.hd, hdp = D.hdp, ld = D.ld, ldp = BS + C::pad_tile;
  const float scale = D.scale;
  for_each_gpu_tile<C>(
      "kformer::attention_fused_dkv", exec, D, KV, false, GpuScratch<C>::dkv(hd),
      KOKKOS_LAMBDA(const GpuTeam<ExecSpace>& team, const Tile& tile, ScratchCarver& sc) {
        const int b = tile.b, kvh = tile.h, k0 = tile.r0, nk = tile.n;
        float* Qs = sc.take(BS * ld);
        float* dOs = sc.take(BS * ld);
        float* Pt = sc.take(BQ * ldp);
        float* dSt = sc.take(BQ * ldp);
        const int kc = L.k_col(kvh), vc = L.v_col(kvh);
        for (int c0 = 0; c0 < hd; c0 += C::hd_chunk) {
          const int ncol = hd - c0 < C::hd_chunk ? hd - c0 : C::hd_chunk;
          LaneRegs<ExecSpace, C, RM * CM> dK, dV;
          for_each_lane<C>(team, [&](int g, int v) {
            dK.zero(g, v);
            dV.zero(g, v);
          });
          for (int hg = 0; hg < G; ++hg) {
            const int h = kvh * G + hg;
            for (int q0 = (k0 / BS) * BS; q0 < T; q0 += BS) {
              const int nq = T - q0 < BS ? T - q0 : BS;
              team.team_barrier();  // the previous tile's Q, dO, P^T and dS^T are no longer read
              stage_rows(team, qkv, b, q0, nq, L.q_col(h), hd, hdp, Qs, ld);
              stage_rows(team, dout, b, q0, nq, h * hd, hd, hdp, dOs, ld);
              team.team_barrier();
              for_each_lane<C>(team, [&](int g, int v) {
                const TQ *kr[RM], *vr[RM];
                head_rows(qkv, b, k0, nk, g, TS, kc, kr);
                head_rows(qkv, b, k0, nk, g, TS, vc, vr);
                float s[RM][RN], dp[RM][RN];
                tile_dots<RM, RN, VL>(kr, Qs, ld, v, nq, hd, s);
                tile_dots<RM, RN, VL>(vr, dOs, ld, v, nq, hd, dp);
                KFORMER_ATTN_UNROLL
                for (int c = 0; c < RN; ++c) {
                  const int i = v + VL * c, ic = i < nq ? i : nq - 1;
                  const float li = lse(b, h, q0 + ic), di = delta(b, h, q0 + ic);
                  KFORMER_ATTN_UNROLL
                  for (int r = 0; r < RM; ++r) {
                    const int j = g + TS * r;
                    const bool seen = i < nq && j < nk && q0 + i >= k0 + j;
                    const float p = seen ? fast_exp(scale * s[r][c] - li) : 0.f;
                    Pt[j * ldp + i] = p;
                    dSt[j * ldp + i] = seen ? p * (dp[r][c] - di) : 0.f;
                  }
                }
              });
              team.team_barrier();
              for_each_lane<C>(team, [&](int g, int v) {
                const float *wp[RM], *ws[RM];
                KFORMER_ATTN_UNROLL
                for (int r = 0; r < RM; ++r) {
                  wp[r] = Pt + (g + TS * r) * ldp;
                  ws[r] = dSt + (g + TS * r) * ldp;
                }
                accumulate_tile<RM, CM, VL>(wp, dOs, ld, nq, c0, v, ncol, dV.at(g, v));
                accumulate_tile<RM, CM, VL>(ws, Qs, ld, nq, c0, v, ncol, dK.at(g, v));
              });
            }
          }
          for_each_lane<C>(team, [&](int g, int v) {
            store_tile<RM, CM, VL, TS>(dK.at(g, v), g, v, nk, c0, ncol,
                                       [&](int j, int c, float x) { dqkv(b, k0 + j, kc + c) = TD(scale * x); });
            store_tile<RM, CM, VL, TS>(dV.at(g, v), g, v, nk, c0, ncol,
                                       [&](int j, int c, float x) { dqkv(b, k0 + j, vc + c) = TD(x); });
          });
        }
      });
}

}  // namespace kformer::kernels::detail
