// Forward of the fused causal GQA attention in the FlashAttention-2 shape for GPUs
// (configuration C, e.g. GpuAttentionTile; tests run it on the host too). One team per (batch,
// query head, BQ query rows) streams the key tiles up to the diagonal through team scratch with
// an online softmax; the output rows accumulate in lane-private registers, so no T x T buffer
// and no (BQ, hd) scratch tile exist. Per key tile:
//   1. stage K (BK, hd) in scratch;
//   2. S = scale * Q K^T, thread g / lane v computing rows g + team*r x keys v + vector*c from
//      Q read through the L1 cache and K from scratch;
//   3. per row (one thread, its lanes over the keys): new max, P = exp(S - max), row sum by a
//      vector reduce (fixed order), the factor that rescales the older terms; V replaces K;
//   4. O = O * factor + P V, thread g / lane v owning rows g + team*r x columns v + vector*c.
#pragma once

#include "attention_gpu_common.hpp"

namespace kformer::kernels::detail {

// out (B,T,H*hd) and lse (B,H,T) (logsumexp of each row's scaled scores) from qkv.
template <class C, class ExecSpace, class OutView, class QkvView>
void attention_gpu_forward(const ExecSpace& exec, const OutView& out, const DView<float***, ExecSpace>& lse,
                           const QkvView& qkv, const QkvLayout& L) {
  static_assert(valid_gpu_tile<C>(), "attention: invalid GPU tile configuration");
  using TO = elem_t<OutView>;
  using TQ = typename QkvView::value_type;
  constexpr int TS = C::team, VL = C::vector, BQ = C::BQ, BK = C::BK;
  constexpr int RM = BQ / TS, RN = BK / VL, CM = C::hd_chunk / VL;
  const GpuDims<C> D(qkv, L);
  const int H = L.H, hd = D.hd, hdp = D.hdp, ld = D.ld, lds = BK + C::pad_tile;
  const float scale = D.scale;
  for_each_gpu_tile<C>(
      "kformer::attention_fused_forward", exec, D, H, true, GpuScratch<C>::forward(hd),
      KOKKOS_LAMBDA(const GpuTeam<ExecSpace>& team, const Tile& tile, ScratchCarver& sc) {
        const int b = tile.b, h = tile.h, q0 = tile.r0, nq = tile.n;
        float* KV = sc.take(BK * ld);  // K, then V, of the current key tile
        float* P = sc.take(BQ * lds);  // scores, then probabilities
        float* m = sc.take(BQ);        // running row max
        float* l = sc.take(BQ);        // running row sum
        float* f = sc.take(BQ);        // this tile's rescale factor of the older terms
        const int kc = L.k_col(L.kv_of(h)), vc = L.v_col(L.kv_of(h)), qc = L.q_col(h);
        for (int c0 = 0; c0 < hd; c0 += C::hd_chunk) {  // one sweep per head_dim chunk (one if hd <= hd_chunk)
          const int ncol = hd - c0 < C::hd_chunk ? hd - c0 : C::hd_chunk;
          LaneRegs<ExecSpace, C, RM * CM> O;
          for_each_lane<C>(team, [&](int g, int v) { O.zero(g, v); });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, BQ), [&](const int i) {
            Kokkos::single(Kokkos::PerThread(team), [&] {
              m[i] = kNegBig;
              l[i] = 0.f;
            });
          });
          for (int k0 = 0; k0 < q0 + nq; k0 += BK) {
            const int nk = q0 + nq - k0 < BK ? q0 + nq - k0 : BK;
            team.team_barrier();  // the previous tile's V and P are no longer read
            stage_rows(team, qkv, b, k0, nk, kc, hd, hdp, KV, ld);
            team.team_barrier();
            for_each_lane<C>(team, [&](int g, int v) {
              const TQ* q[RM];
              head_rows(qkv, b, q0, nq, g, TS, qc, q);
              float s[RM][RN];
              tile_dots<RM, RN, VL>(q, KV, ld, v, nk, hd, s);
              KFORMER_ATTN_UNROLL
              for (int r = 0; r < RM; ++r) {
                KFORMER_ATTN_UNROLL
                for (int c = 0; c < RN; ++c) P[(g + TS * r) * lds + v + VL * c] = scale * s[r][c];
              }
            });
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, BQ), [&](const int i) {
              float* p = P + i * lds;
              const int lim = q0 + i - k0 + 1;  // causal: row i sees keys k0 + j <= q0 + i
              const int nv = i >= nq || lim <= 0 ? 0 : (lim < nk ? lim : nk);
              float tmx = kNegBig;
              Kokkos::parallel_reduce(
                  Kokkos::ThreadVectorRange(team, nv), [&](const int j, float& a) { a = p[j] > a ? p[j] : a; },
                  Kokkos::Max<float>(tmx));
              const float mx = tmx > m[i] ? tmx : m[i];
              Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, BK),
                                   [&](const int j) { p[j] = j < nv ? fast_exp(p[j] - mx) : 0.f; });
              float sum = 0.f;
              Kokkos::parallel_reduce(
                  Kokkos::ThreadVectorRange(team, nv), [&](const int j, float& a) { a += p[j]; }, sum);
              Kokkos::single(Kokkos::PerThread(team), [&] {
                f[i] = fast_exp(m[i] - mx);
                l[i] = l[i] * f[i] + sum;
                m[i] = mx;
              });
            });
            stage_rows(team, qkv, b, k0, nk, vc, hd, hdp, KV, ld);  // K was last read before the barrier above
            team.team_barrier();
            for_each_lane<C>(team, [&](int g, int v) {
              float* o = O.at(g, v);
              const float* w[RM];
              KFORMER_ATTN_UNROLL
              for (int r = 0; r < RM; ++r) {
                w[r] = P + (g + TS * r) * lds;
                KFORMER_ATTN_UNROLL
                for (int cc = 0; cc < CM; ++cc) o[r * CM + cc] *= f[g + TS * r];
              }
              accumulate_tile<RM, CM, VL>(w, KV, ld, nk, c0, v, ncol, o);
            });
          }
          team.team_barrier();
          for_each_lane<C>(team, [&](int g, int v) {
            store_tile<RM, CM, VL, TS>(O.at(g, v), g, v, nq, c0, ncol,
                                       [&](int i, int c, float x) { out(b, q0 + i, h * hd + c) = TO(x / l[i]); });
          });
          if (c0 == 0)
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](const int i) {
              Kokkos::single(Kokkos::PerThread(team), [&] { lse(b, h, q0 + i) = m[i] + kmath::log(l[i]); });
            });
          team.team_barrier();  // m and l are read above before the next chunk resets them
        }
      });
}

}  // namespace kformer::kernels::detail
