// Backward of the fused causal GQA attention (attention_fused.hpp), FlashAttention-2 style but
// without atomics, so it is bitwise reproducible: the probabilities are recomputed tile by tile
// from the saved logsumexp, and the gradients come from two passes that each own their output:
//   pass 1, one team per (batch, kv head, key tile): dK and dV, looping over the G query heads of
//           the group and the query tiles at or below the diagonal, in a fixed order;
//   pass 2, one team per (batch, query head, query tile): dQ, looping over the key tiles.
// delta (B,H,T) = rowsum(dout * out) is computed first (scratch passed by the caller). Two
// shapes, chosen by the tile configuration (attention_tiles.hpp): the host kernels below and the
// GPU kernels (attention_gpu_dkv.hpp, attention_gpu_dq.hpp).
#pragma once

#include "attention_common.hpp"
#include "attention_gpu_dkv.hpp"
#include "attention_gpu_dq.hpp"
#include "attention_tc_backward.hpp"
#include "attention_tiles.hpp"

namespace kformer::kernels {

namespace detail {
// delta(b, h, t) = sum_d dout(b, t, h*hd + d) * out(b, t, h*hd + d).
template <class ExecSpace, class DoutView, class OutView>
void attention_delta(const ExecSpace& exec, const DView<float***, ExecSpace>& delta, const DoutView& dout,
                     const OutView& out, const QkvLayout& L) {
  const int T = static_cast<int>(dout.extent(1)), hd = L.hd;
  Kokkos::parallel_for(
      "kformer::attention_fused_delta",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(exec, {0, 0}, {int64_t(dout.extent(0)) * T, int64_t(L.H)}),
      KOKKOS_LAMBDA(const int64_t bt, const int64_t h) {
        const int b = static_cast<int>(bt / T), t = static_cast<int>(bt % T);
        float s = 0.f;
        for (int d = 0; d < hd; ++d) s += float(dout(b, t, h * hd + d)) * float(out(b, t, h * hd + d));
        delta(b, h, t) = s;
      });
}

// The host shape (C: HostAttentionTile); delta is filled.
template <class C, class ExecSpace, class DqkvView, class DoutView, class QkvView>
void attention_host_backward(const ExecSpace& exec, const DqkvView& dqkv, const DView<float***, ExecSpace>& delta,
                             const DoutView& dout, const QkvView& qkv, const DView<const float***, ExecSpace>& lse,
                             const QkvLayout& L) {
  using TD = elem_t<DqkvView>;
  const int B = static_cast<int>(qkv.extent(0)), T = static_cast<int>(qkv.extent(1));
  const int H = L.H, KV = L.KV, G = L.H / L.KV, hd = L.hd;
  constexpr int BQ = C::BQ, BK = C::BK;
  const int nqt = (T + BQ - 1) / BQ, nkt = (T + BK - 1) / BK;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));

  // Pass 1. K, V, dK, dV (BK,hd) | Q*scale, dO (BQ,hd) | (Q*scale)^T, dO^T (hd,BQ) | P, dS (BK,BQ)
  const int nf1 = 4 * BK * hd + 4 * BQ * hd + 2 * BK * BQ;
  int lv1 = 0;
  const auto p1 = detail::scratch_team_policy(exec, B * KV * nkt, nf1, lv1);
  Kokkos::parallel_for(
      "kformer::attention_fused_dkv", p1, KOKKOS_LAMBDA(const typename decltype(p1)::member_type& team) {
        const detail::Tile tile = detail::tile_of(team.league_rank(), nkt, KV, BK, T, false);
        const int b = tile.b, kvh = tile.h, k0 = tile.r0, nk = tile.n;
        detail::ScratchCarver sc{detail::ScratchFloats<ExecSpace>(team.team_scratch(lv1), nf1).data()};
        float* K = sc.take(BK * hd);
        float* V = sc.take(BK * hd);
        float* dK = sc.take(BK * hd);
        float* dV = sc.take(BK * hd);
        float* Q = sc.take(BQ * hd);
        float* dO = sc.take(BQ * hd);
        float* QT = sc.take(hd * BQ);
        float* dOT = sc.take(hd * BQ);
        float* P = sc.take(BK * BQ);
        float* dS = sc.take(BK * BQ);
        detail::load_head_rows(team, qkv, b, k0, nk, L.k_col(kvh), hd, 1.f, K, nullptr, 0);
        detail::load_head_rows(team, qkv, b, k0, nk, L.v_col(kvh), hd, 1.f, V, nullptr, 0);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk * hd), [&](const int e) { dK[e] = dV[e] = 0.f; });
        for (int g = 0; g < G; ++g) {
          const int h = kvh * G + g;
          for (int q0 = (k0 / BQ) * BQ; q0 < T; q0 += BQ) {
            const int nq = T - q0 < BQ ? T - q0 : BQ;
            team.team_barrier();  // the previous Q, dO tiles are no longer read
            detail::load_head_rows(team, qkv, b, q0, nq, L.q_col(h), hd, scale, Q, QT, BQ);
            detail::load_head_rows(team, dout, b, q0, nq, h * hd, hd, 1.f, dO, dOT, BQ);
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk), [&](const int j) {
              const int i0 = k0 + j - q0 > 0 ? k0 + j - q0 : 0;  // causal: queries >= k0 + j
              if (i0 >= nq) return;
              float* p = P + j * BQ;
              float* ds = dS + j * BQ;
              detail::row_times_tile(K + j * hd, QT + i0, BQ, hd, nq - i0, p + i0);
              detail::row_times_tile(V + j * hd, dOT + i0, BQ, hd, nq - i0, ds + i0);
              for (int i = i0; i < nq; ++i) {
                p[i] = detail::fast_exp(p[i] - lse(b, h, q0 + i));
                ds[i] = p[i] * (ds[i] - delta(b, h, q0 + i));
              }
              detail::accumulate_rows(p + i0, dO + i0 * hd, hd, nq - i0, dV + j * hd);
              detail::accumulate_rows(ds + i0, Q + i0 * hd, hd, nq - i0, dK + j * hd);
            });
          }
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nk), [&](const int j) {
          for (int d = 0; d < hd; ++d) {
            dqkv(b, k0 + j, L.k_col(kvh) + d) = TD(dK[j * hd + d]);
            dqkv(b, k0 + j, L.v_col(kvh) + d) = TD(dV[j * hd + d]);
          }
        });
      });

  // Pass 2. Q*scale, dO, dQ (BQ,hd) | K^T, V^T (hd,BK) | K (BK,hd) | S, dP (BQ,BK)
  const int nf2 = 3 * BQ * hd + 3 * BK * hd + 2 * BQ * BK;
  int lv2 = 0;
  const auto p2 = detail::scratch_team_policy(exec, B * H * nqt, nf2, lv2);
  Kokkos::parallel_for(
      "kformer::attention_fused_dq", p2, KOKKOS_LAMBDA(const typename decltype(p2)::member_type& team) {
        const detail::Tile tile = detail::tile_of(team.league_rank(), nqt, H, BQ, T, true);
        const int b = tile.b, h = tile.h, q0 = tile.r0, nq = tile.n;
        detail::ScratchCarver sc{detail::ScratchFloats<ExecSpace>(team.team_scratch(lv2), nf2).data()};
        float* Q = sc.take(BQ * hd);
        float* dO = sc.take(BQ * hd);
        float* dQ = sc.take(BQ * hd);
        float* KT = sc.take(hd * BK);
        float* VT = sc.take(hd * BK);
        float* K = sc.take(BK * hd);
        float* S = sc.take(BQ * BK);
        float* dP = sc.take(BQ * BK);
        const int kc = L.k_col(L.kv_of(h)), vc = L.v_col(L.kv_of(h));
        detail::load_head_rows(team, qkv, b, q0, nq, L.q_col(h), hd, scale, Q, nullptr, 0);
        detail::load_head_rows(team, dout, b, q0, nq, h * hd, hd, 1.f, dO, nullptr, 0);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq * hd), [&](const int e) { dQ[e] = 0.f; });
        for (int k0 = 0; k0 < q0 + nq; k0 += BK) {
          const int nk = q0 + nq - k0 < BK ? q0 + nq - k0 : BK;
          team.team_barrier();
          detail::load_head_rows(team, qkv, b, k0, nk, kc, hd, 1.f, K, KT, BK);
          detail::load_head_rows(team, qkv, b, k0, nk, vc, hd, 1.f, nullptr, VT, BK);
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](const int i) {
            const int nv = q0 + i - k0 + 1 < nk ? q0 + i - k0 + 1 : nk;
            if (nv <= 0) return;
            float* s = S + i * BK;
            float* dp = dP + i * BK;
            detail::row_times_tile(Q + i * hd, KT, BK, hd, nv, s);
            detail::row_times_tile(dO + i * hd, VT, BK, hd, nv, dp);
            const float li = lse(b, h, q0 + i), di = delta(b, h, q0 + i);
            for (int j = 0; j < nv; ++j) dp[j] = detail::fast_exp(s[j] - li) * (dp[j] - di);
            detail::accumulate_rows(dp, K, hd, nv, dQ + i * hd);
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](const int i) {
          for (int d = 0; d < hd; ++d) dqkv(b, q0 + i, L.q_col(h) + d) = TD(scale * dQ[i * hd + d]);
        });
      });
}
}  // namespace detail

// dqkv (B,T,(H+2KV)*hd) written from dout (B,T,H*hd), the forward's qkv, out and lse (B,H,T);
// delta (B,H,T) is scratch. Cfg: a tile configuration (attention_tiles.hpp), by default the
// execution space's.
template <class Cfg = detail::AutoTile, class ExecSpace, class DqkvView, class DoutView, class QkvView, class OutView>
void attention_fused_backward(const ExecSpace& exec, const DqkvView& dqkv, const DView<float***, ExecSpace>& delta,
                              const DoutView& dout, const QkvView& qkv, const OutView& out,
                              const DView<const float***, ExecSpace>& lse, int n_heads, int n_kv_heads) {
  using C = detail::resolve_tile_t<Cfg, ExecSpace>;
  const detail::QkvLayout L = detail::make_qkv_layout(qkv.extent(2), n_heads, n_kv_heads);
  detail::attention_delta(exec, delta, dout, out, L);
  if constexpr (detail::uses_tensor_cores<C>::value) {
    detail::attention_tc_backward<C>(exec, dqkv, dout, qkv, lse, delta, L);
  } else {
    if constexpr (detail::default_tensor_cores<Cfg, ExecSpace, typename QkvView::value_type>) {
      if (detail::tensor_core_head_dim(L.hd)) {
        detail::attention_tc_backward<TensorCoreTile>(exec, dqkv, dout, qkv, lse, delta, L);
        return;
      }
    }
    if constexpr (C::gpu_shaped) {
      detail::attention_gpu_dkv<C>(exec, dqkv, dout, qkv, lse, delta, L);
      detail::attention_gpu_dq<C>(exec, dqkv, dout, qkv, lse, delta, L);
    } else {
      detail::attention_host_backward<C>(exec, dqkv, delta, dout, qkv, lse, L);
    }
  }
}

}  // namespace kformer::kernels
