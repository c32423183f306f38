// Backward of the fused causal GQA attention in the tensor-core shape (TensorCoreTile: fp32, every
// product 3xTF32, warp_mma.hpp), in the two passes of attention_fused_backward.hpp, each owning
// its output (no atomics: bitwise reproducible), delta (B,H,T) = rowsum(dout * out) given. Each
// warp owns 16 rows; its own rows' A operands stay in registers where head_dim <= 64 (read through
// the L1 cache above), the streamed tiles are staged by the team in scratch:
//   dK/dV pass, one team per (batch, kv head, BQ key rows): for each query head of the group and
//     each query tile of BK rows at or below the diagonal (Q and dO staged), S^T = K Q^T and
//     dP^T = V dO^T into C fragments, P^T = exp(scale S^T - lse) and dS^T = P^T (dP^T - delta) in
//     those registers, then dV += P^T dO and dK += dS^T Q;
//   dQ pass, one team per (batch, query head, BQ query rows): for each key tile up to the team's
//     last row (K and V staged), S = Q K^T and dP = dO V^T, dS = P (dP - delta), then dQ += dS K.
// P^T, dS^T and dS are the second products' A operands where they are, in registers (c_as_a, the
// staged tile's rows in c_order_row's order): no warp writes scratch. dK and dQ take the softmax
// scale when stored.
#pragma once

#include "attention_tc_common.hpp"

namespace kformer::kernels::detail {

// One element of a tile seen (or masked) by both passes: the score s (unscaled) becomes the
// probability p = exp(scale s - lse), and dp becomes dS = p (dp - delta); both 0 where not seen.
KOKKOS_INLINE_FUNCTION void probability_and_score_grad(float& s, float& dp, bool seen, float scale, float lse,
                                                       float delta) {
  const float p = seen ? fast_exp(scale * s - lse) : 0.f;
  dp = seen ? p * (dp - delta) : 0.f;
  s = p;
}

// The k and v columns of dqkv. NT: head_tiles_for(head_dim).
template <class C, int NT, class ExecSpace, class DqkvView, class DoutView, class QkvView>
void attention_tc_dkv(const ExecSpace& exec, const DqkvView& dqkv, const DoutView& dout, const QkvView& qkv,
                      const DView<const float***, ExecSpace>& lse, const DView<const float***, ExecSpace>& delta,
                      const QkvLayout& L) {
  using TD = elem_t<DqkvView>;
  constexpr int NW = C::warps, BQ = C::BQ, BK = C::BK, KT = BK / 8;
  const int T = static_cast<int>(qkv.extent(1)), KV = L.KV, G = L.H / L.KV, hd = L.hd, used = hd / 8;
  const int ld = tile_ld_rows(hd), tiles = (T + BQ - 1) / BQ;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  tc_launch<C>(
      "kformer::attention_fused_dkv", exec, static_cast<int>(qkv.extent(0)) * KV * tiles, tc_scratch<C>(hd),
      KOKKOS_LAMBDA(const TcTeam<ExecSpace>& team, float* scratch) {
        const Tile tile = team_tile<ExecSpace>(team, tiles, KV, BQ, T, false);
        const int b = tile.b, kc = L.k_col(tile.h), vc = L.v_col(tile.h), last = tile.r0 + tile.n - 1;
        float* Qs = scratch;
        float* dOs = Qs + BK * ld;
        WarpRegs<ExecSpace, NW, 4 * NT> dK, dV;
        WarpRegs<ExecSpace, NW, tc_a_in_registers<NT> ? 4 * NT : 1> KA, VA;
        WarpRegs<ExecSpace, NW, 4 * KT> S, dP;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
          keep_a_fragments<ExecSpace, NT>(KA, w, qkv, b, tile.r0 + 16 * w, T, kc, used);
          keep_a_fragments<ExecSpace, NT>(VA, w, qkv, b, tile.r0 + 16 * w, T, vc, used);
          fill_warp(dK, w, 0.f);
          fill_warp(dV, w, 0.f);
        });
        for (int hg = 0; hg < G; ++hg) {
          const int h = tile.h * G + hg, qc = L.q_col(h), oc = h * hd;
          for (int q0 = tile.r0; q0 < T; q0 += BK) {  // the query tiles at or below the diagonal
            stage_next_tiles(team, b, q0, BK, T, hd, qkv, qc, Qs, ld, dout, oc, dOs, ld);
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
              const int j0 = tile.r0 + 16 * w;  // the warp's keys j0 .. j0 + 15
              if (j0 > last) return;
              // The warp's K and V rows as A fragments.
              const auto k_rows = [&](int ks, int i, int ln) {
                return a_fragment<NT>(KA, w, ks, i, ln, qkv, b, j0, T, kc);
              };
              const auto v_rows = [&](int ks, int i, int ln) {
                return a_fragment<NT>(VA, w, ks, i, ln, qkv, b, j0, T, vc);
              };
              fill_warp(S, w, 0.f);
              fill_warp(dP, w, 0.f);
              warp_product<ExecSpace, KT, NT>(S, w, KT, used, k_rows, [&](int d, int n) { return Qs[n * ld + d]; });
              warp_product<ExecSpace, KT, NT>(dP, w, KT, used, v_rows, [&](int d, int n) { return dOs[n * ld + d]; });
              // P^T into S's registers, dS^T into dP's.
              each_lane<ExecSpace>([&](int ln) {
                for_each_c_element<KT>(ln, [&](int k, int r, int c) {
                  const int key = j0 + r, q = q0 + c, qs = clamp_row(q, T);
                  probability_and_score_grad(S.at(w, ln)[k], dP.at(w, ln)[k], q < T && key <= last && q >= key,
                                             scale, lse(b, h, qs), delta(b, h, qs));
                });
              });
              warp_product<ExecSpace, NT, KT>(dV, w, used, KT, c_as_a(S, w),
                                              [&](int q, int d) { return dOs[c_order_row(q) * ld + d]; });
              warp_product<ExecSpace, NT, KT>(dK, w, used, KT, c_as_a(dP, w),
                                              [&](int q, int d) { return Qs[c_order_row(q) * ld + d]; });
            });
          }
        }
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
          const int j0 = tile.r0 + 16 * w;
          if (j0 > last) return;
          each_lane<ExecSpace>([&](int ln) {
            for_each_c_element<NT>(ln, [&](int k, int r, int d) {
              if (j0 + r <= last && d < hd) {
                dqkv(b, j0 + r, kc + d) = TD(scale * dK.at(w, ln)[k]);
                dqkv(b, j0 + r, vc + d) = TD(dV.at(w, ln)[k]);
              }
            });
          });
        });
      });
}

// The q columns of dqkv. NT: head_tiles_for(head_dim).
template <class C, int NT, class ExecSpace, class DqkvView, class DoutView, class QkvView>
void attention_tc_dq(const ExecSpace& exec, const DqkvView& dqkv, const DoutView& dout, const QkvView& qkv,
                     const DView<const float***, ExecSpace>& lse, const DView<const float***, ExecSpace>& delta,
                     const QkvLayout& L) {
  using TD = elem_t<DqkvView>;
  constexpr int NW = C::warps, BQ = C::BQ, BK = C::BK, KT = BK / 8;
  const int T = static_cast<int>(qkv.extent(1)), H = L.H, hd = L.hd, used = hd / 8;
  const int ld = tile_ld_rows(hd), tiles = (T + BQ - 1) / BQ;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  tc_launch<C>(
      "kformer::attention_fused_dq", exec, static_cast<int>(qkv.extent(0)) * H * tiles, tc_scratch<C>(hd),
      KOKKOS_LAMBDA(const TcTeam<ExecSpace>& team, float* scratch) {
        const Tile tile = team_tile<ExecSpace>(team, tiles, H, BQ, T, true);
        const int b = tile.b, h = tile.h, qc = L.q_col(h), oc = h * hd, last = tile.r0 + tile.n - 1;
        const int kc = L.k_col(L.kv_of(h)), vc = L.v_col(L.kv_of(h));
        float* Ks = scratch;
        float* Vs = Ks + BK * ld;
        WarpRegs<ExecSpace, NW, 4 * NT> dQ;
        WarpRegs<ExecSpace, NW, tc_a_in_registers<NT> ? 4 * NT : 1> QA, OA;
        WarpRegs<ExecSpace, NW, 4 * KT> S, dP;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
          keep_a_fragments<ExecSpace, NT>(QA, w, qkv, b, tile.r0 + 16 * w, T, qc, used);
          keep_a_fragments<ExecSpace, NT>(OA, w, dout, b, tile.r0 + 16 * w, T, oc, used);
          fill_warp(dQ, w, 0.f);
        });
        for (int k0 = 0; k0 <= last; k0 += BK) {
          stage_next_tiles(team, b, k0, BK, T, hd, qkv, kc, Ks, ld, qkv, vc, Vs, ld);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
            const int r0 = tile.r0 + 16 * w;  // the warp's rows r0 .. r0 + 15
            const int kend = r0 + 15 < last ? r0 + 15 : last;
            if (r0 > last || k0 > kend) return;
            fill_warp(S, w, 0.f);
            fill_warp(dP, w, 0.f);
            warp_product<ExecSpace, KT, NT>(
                S, w, KT, used,
                [&](int ks, int i, int ln) { return a_fragment<NT>(QA, w, ks, i, ln, qkv, b, r0, T, qc); },
                [&](int d, int n) { return Ks[n * ld + d]; });
            warp_product<ExecSpace, KT, NT>(
                dP, w, KT, used,
                [&](int ks, int i, int ln) { return a_fragment<NT>(OA, w, ks, i, ln, dout, b, r0, T, oc); },
                [&](int d, int n) { return Vs[n * ld + d]; });
            // P into S's registers, dS into dP's.
            each_lane<ExecSpace>([&](int ln) {
              for_each_c_element<KT>(ln, [&](int k, int r, int c) {
                const int row = r0 + r, rs = clamp_row(row, T);
                probability_and_score_grad(S.at(w, ln)[k], dP.at(w, ln)[k], row <= last && k0 + c <= row, scale,
                                           lse(b, h, rs), delta(b, h, rs));
              });
            });
            warp_product<ExecSpace, NT, KT>(dQ, w, used, KT, c_as_a(dP, w),
                                            [&](int k, int d) { return Ks[c_order_row(k) * ld + d]; });
          });
        }
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
          const int r0 = tile.r0 + 16 * w;
          if (r0 > last) return;
          each_lane<ExecSpace>([&](int ln) {
            for_each_c_element<NT>(ln, [&](int k, int r, int d) {
              if (r0 + r <= last && d < hd) dqkv(b, r0 + r, qc + d) = TD(scale * dQ.at(w, ln)[k]);
            });
          });
        });
      });
}

// dK, dV, then dQ into dqkv; throws where head_dim does not suit the shape.
template <class C, class ExecSpace, class DqkvView, class DoutView, class QkvView>
void attention_tc_backward(const ExecSpace& exec, const DqkvView& dqkv, const DoutView& dout, const QkvView& qkv,
                           const DView<const float***, ExecSpace>& lse, const DView<const float***, ExecSpace>& delta,
                           const QkvLayout& L) {
  check_tensor_core_layout(L);
  if (head_tiles_for(L.hd) == 4) {
    attention_tc_dkv<C, 4>(exec, dqkv, dout, qkv, lse, delta, L);
    attention_tc_dq<C, 4>(exec, dqkv, dout, qkv, lse, delta, L);
  } else if (head_tiles_for(L.hd) == 8) {
    attention_tc_dkv<C, 8>(exec, dqkv, dout, qkv, lse, delta, L);
    attention_tc_dq<C, 8>(exec, dqkv, dout, qkv, lse, delta, L);
  } else {
    attention_tc_dkv<C, 16>(exec, dqkv, dout, qkv, lse, delta, L);
    attention_tc_dq<C, 16>(exec, dqkv, dout, qkv, lse, delta, L);
  }
}

}  // namespace kformer::kernels::detail
