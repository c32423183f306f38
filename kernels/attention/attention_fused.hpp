// Causal grouped-query attention in the FlashAttention style: one team per (batch, query head,
// tile of query rows) walks the key tiles up to the diagonal with an online softmax; no T x T
// buffer exists. The forward saves only the row logsumexp (B,H,T); the backward
// (attention_fused_backward.hpp) recomputes the probabilities tile by tile. Two shapes, chosen
// by the tile configuration (attention_tiles.hpp): the host kernel below, where a team is one
// thread holding Q, K^T, V, the score tile and the output in its caches, and the GPU kernel
// (attention_gpu_forward.hpp). Layout of qkv and out: see attention_common.hpp.
#pragma once

#include "attention_common.hpp"
#include "attention_gpu_forward.hpp"
#include "attention_tc_forward.hpp"
#include "attention_tiles.hpp"
#include "team_reduce.hpp"

namespace kformer::kernels {

namespace detail {
// The host shape: every product a vectorised loop over one row of a tile (C: HostAttentionTile).
template <class C, class ExecSpace, class OutView, class QkvView>
void attention_host_forward(const ExecSpace& exec, const OutView& out, const DView<float***, ExecSpace>& lse,
                            const QkvView& qkv, const QkvLayout& L) {
  using TO = elem_t<OutView>;
  const int B = static_cast<int>(qkv.extent(0)), T = static_cast<int>(qkv.extent(1)), H = L.H, hd = L.hd;
  constexpr int BQ = C::BQ, BK = C::BK;
  const int nqt = (T + BQ - 1) / BQ;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  // Q (BQ,hd) | K^T (hd,BK) | V (BK,hd) | S (BQ,BK) | O (BQ,hd) | m (BQ) | l (BQ)
  const int nfloats = 2 * BQ * hd + 2 * BK * hd + BQ * BK + 2 * BQ;
  int level = 0;
  const auto policy = detail::scratch_team_policy(exec, B * H * nqt, nfloats, level);
  Kokkos::parallel_for(
      "kformer::attention_fused_forward", policy, KOKKOS_LAMBDA(const typename decltype(policy)::member_type& team) {
        const detail::Tile tile = detail::tile_of(team.league_rank(), nqt, H, BQ, T, true);
        const int b = tile.b, h = tile.h, q0 = tile.r0, nq = tile.n;
        detail::ScratchCarver sc{detail::ScratchFloats<ExecSpace>(team.team_scratch(level), nfloats).data()};
        float* Q = sc.take(BQ * hd);
        float* KT = sc.take(hd * BK);
        float* V = sc.take(BK * hd);
        float* S = sc.take(BQ * BK);
        float* O = sc.take(BQ * hd);
        float* m = sc.take(BQ);
        float* l = sc.take(BQ);
        const int kc = L.k_col(L.kv_of(h)), vc = L.v_col(L.kv_of(h));
        detail::load_head_rows(team, qkv, b, q0, nq, L.q_col(h), hd, scale, Q, nullptr, 0);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](const int i) {
          for (int d = 0; d < hd; ++d) O[i * hd + d] = 0.f;
          m[i] = detail::kNegBig;
          l[i] = 0.f;
        });
        for (int k0 = 0; k0 < q0 + nq; k0 += BK) {
          const int nk = q0 + nq - k0 < BK ? q0 + nq - k0 : BK;
          team.team_barrier();  // the previous K, V tiles are no longer read
          detail::load_head_rows(team, qkv, b, k0, nk, kc, hd, 1.f, nullptr, KT, BK);
          detail::load_head_rows(team, qkv, b, k0, nk, vc, hd, 1.f, V, nullptr, 0);
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](const int i) {
            const int nv = q0 + i - k0 + 1 < nk ? q0 + i - k0 + 1 : nk;  // causal: keys <= q0 + i
            if (nv <= 0) return;
            float* s = S + i * BK;
            detail::row_times_tile(Q + i * hd, KT, BK, hd, nv, s);
            float mx = m[i];
            for (int j = 0; j < nv; ++j) mx = s[j] > mx ? s[j] : mx;
            const float corr = detail::fast_exp(m[i] - mx);
            for (int j = 0; j < nv; ++j) s[j] = detail::fast_exp(s[j] - mx);
            l[i] = l[i] * corr + detail::sum_by_lanes(nv, [&](int j) { return s[j]; });
            m[i] = mx;
            float* o = O + i * hd;
            for (int d = 0; d < hd; ++d) o[d] *= corr;
            detail::accumulate_rows(s, V, hd, nv, o);
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, nq), [&](const int i) {
          const float inv = 1.f / l[i];
          for (int d = 0; d < hd; ++d) out(b, q0 + i, h * hd + d) = TO(O[i * hd + d] * inv);
          lse(b, h, q0 + i) = m[i] + kmath::log(l[i]);
        });
      });
}
}  // namespace detail

// out (B,T,H*hd) and lse (B,H,T) (logsumexp of the scaled scores of each row) from qkv. Cfg: a
// tile configuration (attention_tiles.hpp), by default the execution space's.
template <class Cfg = detail::AutoTile, class ExecSpace, class OutView, class QkvView>
void attention_fused_forward(const ExecSpace& exec, const OutView& out, const DView<float***, ExecSpace>& lse,
                             const QkvView& qkv, int n_heads, int n_kv_heads) {
  using C = detail::resolve_tile_t<Cfg, ExecSpace>;
  const detail::QkvLayout L = detail::make_qkv_layout(qkv.extent(2), n_heads, n_kv_heads);
  if constexpr (detail::uses_tensor_cores<C>::value) {
    detail::attention_tc_forward<C>(exec, out, lse, qkv, L);
  } else {
    if constexpr (detail::default_tensor_cores<Cfg, ExecSpace, typename QkvView::value_type>) {
      if (detail::tensor_core_head_dim(L.hd)) {
        detail::attention_tc_forward<TensorCoreTile>(exec, out, lse, qkv, L);
        return;
      }
    }
    if constexpr (C::gpu_shaped)
      detail::attention_gpu_forward<C>(exec, out, lse, qkv, L);
    else
      detail::attention_host_forward<C>(exec, out, lse, qkv, L);
  }
}

}  // namespace kformer::kernels
