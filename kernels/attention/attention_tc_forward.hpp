// Forward of the fused causal GQA attention in the tensor-core shape (TensorCoreTile: fp32, every
// product 3xTF32 on the tensor cores, warp_mma.hpp). One team per (batch, query head, BQ query
// rows); each warp owns 16 rows, its Q fragments in registers for the whole pass. Per key tile of
// BK keys, staged by the team in scratch (K and V, row strides without bank conflicts):
//   1. S = Q K^T (16 x BK) into the warp's C fragments;
//   2. the online softmax in registers: each row's maximum and sum over the four lanes holding
//      it, P = exp(scale S - max), the older terms' rescale factor;
//   3. O = O * factor + P V, O (16 x hd) in the warp's C fragments, P the A operand where it is
//      (in S's registers, its keys in c_order_row's order, V's rows read in the same order).
// K and V share one row stride (tile_ld_rows): neither tile's fragment loads meet a bank conflict.
// Writes out (B,T,H*hd) = O / sum and lse (B,H,T).
#pragma once

#include "attention_tc_common.hpp"

namespace kformer::kernels::detail {

// NT: head_tiles_for(head_dim).
template <class C, int NT, class ExecSpace, class OutView, class QkvView>
void attention_tc_forward_tiles(const ExecSpace& exec, const OutView& out, const DView<float***, ExecSpace>& lse,
                                const QkvView& qkv, const QkvLayout& L) {
  using TO = elem_t<OutView>;
  constexpr int NW = C::warps, BQ = C::BQ, BK = C::BK, KT = BK / 8;
  const int T = static_cast<int>(qkv.extent(1)), H = L.H, hd = L.hd, used = hd / 8;
  const int ld = tile_ld_rows(hd), tiles = (T + BQ - 1) / BQ;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  tc_launch<C>(
      "kformer::attention_fused_forward", exec, static_cast<int>(qkv.extent(0)) * H * tiles,
      tc_scratch<C>(hd), KOKKOS_LAMBDA(const TcTeam<ExecSpace>& team, float* scratch) {
        const Tile tile = team_tile<ExecSpace>(team, tiles, H, BQ, T, true);
        const int b = tile.b, h = tile.h, last = tile.r0 + tile.n - 1;
        const int qc = L.q_col(h), kc = L.k_col(L.kv_of(h)), vc = L.v_col(L.kv_of(h));
        float* Ks = scratch;
        float* Vs = Ks + BK * ld;
        WarpRegs<ExecSpace, NW, 4 * NT> O, Q;
        WarpRegs<ExecSpace, NW, 4 * KT> S;
        WarpRegs<ExecSpace, NW, 2> m, l, part;  // of the lane's rows g and g + 8 (C rows of i < 2, i >= 2)
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
          load_a_fragments<ExecSpace, NT>(Q, w, qkv, b, tile.r0 + 16 * w, T, qc, used);
          fill_warp(O, w, 0.f);
          fill_warp(m, w, kNegBig);
          fill_warp(l, w, 0.f);
        });
        for (int k0 = 0; k0 <= last; k0 += BK) {
          stage_next_tiles(team, b, k0, BK, T, hd, qkv, kc, Ks, ld, qkv, vc, Vs, ld);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
            const int r0 = tile.r0 + 16 * w;  // the warp's rows r0 .. r0 + 15
            const int kend = r0 + 15 < last ? r0 + 15 : last;  // its last key: the causal diagonal
            if (r0 > last || k0 > kend) return;
            fill_warp(S, w, 0.f);
            warp_product<ExecSpace, KT, NT>(
                S, w, KT, used, [&](int ks, int i, int ln) { return Q.at(w, ln)[4 * ks + i]; },
                [&](int d, int n) { return Ks[n * ld + d]; });
            // Scaled scores, kNegBig where masked; each row's tile maximum over its quad.
            each_lane<ExecSpace>([&](int ln) {
              float* s = S.at(w, ln);
              float* mt = part.at(w, ln);
              mt[0] = mt[1] = kNegBig;
              for_each_c_element<KT>(ln, [&](int k, int r, int c) {
                const int e = (k & 3) >> 1;
                s[k] = k0 + c <= r0 + r && k0 + c <= kend ? scale * s[k] : kNegBig;
                mt[e] = s[k] > mt[e] ? s[k] : mt[e];
              });
            });
            quad_allreduce(part, w, [](float x, float y) { return x > y ? x : y; });
            // New maxima, probabilities in S's registers, the older terms rescaled.
            each_lane<ExecSpace>([&](int ln) {
              float* s = S.at(w, ln);
              float* mx = m.at(w, ln);
              float* sum = part.at(w, ln);
              float f[2];
              for (int e = 0; e < 2; ++e) {
                const float nm = sum[e] > mx[e] ? sum[e] : mx[e];
                f[e] = fast_exp(mx[e] - nm);
                mx[e] = nm;
                sum[e] = 0.f;
              }
              KFORMER_TC_UNROLL
              for (int k = 0; k < 4 * KT; ++k) {
                const int e = (k & 3) >> 1;
                s[k] = s[k] == kNegBig ? 0.f : fast_exp(s[k] - mx[e]);
                sum[e] += s[k];
              }
              float* o = O.at(w, ln);
              KFORMER_TC_UNROLL
              for (int k = 0; k < 4 * NT; ++k) o[k] *= f[(k & 3) >> 1];
              l.at(w, ln)[0] *= f[0];
              l.at(w, ln)[1] *= f[1];
            });
            quad_allreduce(part, w, [](float x, float y) { return x + y; });
            each_lane<ExecSpace>([&](int ln) {
              l.at(w, ln)[0] += part.at(w, ln)[0];
              l.at(w, ln)[1] += part.at(w, ln)[1];
            });
            warp_product<ExecSpace, NT, KT>(O, w, used, KT, c_as_a(S, w),
                                            [&](int k, int d) { return Vs[c_order_row(k) * ld + d]; });
          });
        }
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
          const int r0 = tile.r0 + 16 * w;
          if (r0 > last) return;
          each_lane<ExecSpace>([&](int ln) {
            const float* o = O.at(w, ln);
            for_each_c_element<NT>(ln, [&](int k, int r, int d) {
              if (r0 + r <= last && d < hd) out(b, r0 + r, h * hd + d) = TO(o[k] / l.at(w, ln)[(k & 3) >> 1]);
            });
            if ((ln & 3) == 0)
              for (int e = 0; e < 2; ++e) {
                const int row = r0 + mma_c_row(ln, 2 * e);
                if (row <= last) lse(b, h, row) = m.at(w, ln)[e] + kmath::log(l.at(w, ln)[e]);
              }
          });
        });
      });
}

// out (B,T,H*hd) and lse (B,H,T) from qkv; throws where head_dim does not suit the shape.
template <class C, class ExecSpace, class OutView, class QkvView>
void attention_tc_forward(const ExecSpace& exec, const OutView& out, const DView<float***, ExecSpace>& lse,
                          const QkvView& qkv, const QkvLayout& L) {
  check_tensor_core_layout(L);
  if (head_tiles_for(L.hd) == 4)
    attention_tc_forward_tiles<C, 4>(exec, out, lse, qkv, L);
  else if (head_tiles_for(L.hd) == 8)
    attention_tc_forward_tiles<C, 8>(exec, out, lse, qkv, L);
  else
    attention_tc_forward_tiles<C, 16>(exec, out, lse, qkv, L);
}

}  // namespace kformer::kernels::detail
