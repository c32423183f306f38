// Backward of the fused causal GQA attention in the tensor-core shape (TensorCoreTile: fp32, every
// product 3xTF32, warp_mma.hpp), in the two passes of attention_fused_backward.hpp, each owning
// its output (no atomics: bitwise reproducible), delta (B,H,T) = rowsum(dout * out) given. Each
// warp owns 16 rows and works on its own (no team barrier):
//   dK/dV pass, one team per (batch, kv head, BQ key rows): for each query head of the group and
//     each query tile of BK rows at or below the diagonal, S^T = K Q^T and dP^T = V dO^T into C
//     fragments, P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - delta), both through the warp's
//     scratch tiles, then dV += P^T dO and dK += dS^T Q in registers;
//   dQ pass, one team per (batch, query head, BQ query rows): for each key tile up to the warp's
//     last row, S = Q K^T and dP = dO V^T, dS = P (dP - delta) through the scratch tile, then
//     dQ += dS K.
// dK and dQ take the softmax scale when stored.
#pragma once

#include "attention_tc_common.hpp"

namespace kformer::kernels::detail {

// The k and v columns of dqkv. NT: head_tiles_for(head_dim).
template <class C, int NT, class ExecSpace, class DqkvView, class DoutView, class QkvView>
void attention_tc_dkv(const ExecSpace& exec, const DqkvView& dqkv, const DoutView& dout, const QkvView& qkv,
                      const DView<const float***, ExecSpace>& lse, const DView<const float***, ExecSpace>& delta,
                      const QkvLayout& L) {
  using TD = elem_t<DqkvView>;
  constexpr int NW = C::warps, BQ = C::BQ, BK = C::BK, KT = BK / 8, ld = BK + C::pad;
  const int T = static_cast<int>(qkv.extent(1)), KV = L.KV, G = L.H / L.KV, hd = L.hd, used = hd / 8;
  const int tiles = (T + BQ - 1) / BQ;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  tc_launch<C>(
      "kformer::attention_fused_dkv", exec, static_cast<int>(qkv.extent(0)) * KV * tiles, NW * 2 * 16 * ld,
      KOKKOS_LAMBDA(const TcTeam<ExecSpace>& team, float* scratch) {
        const Tile tile = tile_of(team.league_rank(), tiles, KV, BQ, T, false);
        const int b = tile.b, kc = L.k_col(tile.h), vc = L.v_col(tile.h);
        WarpRegs<ExecSpace, NW, 4 * NT> dK, dV;
        WarpRegs<ExecSpace, NW, 4 * KT> S, dP;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
          const int j0 = tile.r0 + 16 * w, last = tile.r0 + tile.n - 1;  // the warp's keys j0 .. j0 + 15
          if (j0 > last) return;
          float* Pt = scratch + w * 2 * 16 * ld;
          float* dSt = Pt + 16 * ld;
          each_lane<ExecSpace>([&](int ln) {
            KFORMER_TC_UNROLL
            for (int k = 0; k < 4 * NT; ++k) dK.at(w, ln)[k] = dV.at(w, ln)[k] = 0.f;
          });
          for (int hg = 0; hg < G; ++hg) {
            const int h = tile.h * G + hg, qc = L.q_col(h), oc = h * hd;
            for (int q0 = j0 / BK * BK; q0 < T; q0 += BK) {
              each_lane<ExecSpace>([&](int ln) {
                KFORMER_TC_UNROLL
                for (int k = 0; k < 4 * KT; ++k) S.at(w, ln)[k] = dP.at(w, ln)[k] = 0.f;
              });
              warp_product<ExecSpace, KT>(
                  S, w, KT, hd, [&](int r, int d) { return float(qkv(b, clamp_row(j0 + r, T), kc + d)); },
                  [&](int d, int n) { return float(qkv(b, clamp_row(q0 + n, T), qc + d)); });
              warp_product<ExecSpace, KT>(
                  dP, w, KT, hd, [&](int r, int d) { return float(qkv(b, clamp_row(j0 + r, T), vc + d)); },
                  [&](int d, int n) { return float(dout(b, clamp_row(q0 + n, T), oc + d)); });
              each_lane<ExecSpace>([&](int ln) {
                KFORMER_TC_UNROLL
                for (int k = 0; k < 4 * KT; ++k) {
                  const int r = mma_c_row(ln, k & 3), c = 8 * (k >> 2) + mma_c_col(ln, k & 3);
                  const int key = j0 + r, q = q0 + c, qs = clamp_row(q, T);
                  const bool seen = q < T && key <= last && q >= key;
                  const float p = seen ? fast_exp(scale * S.at(w, ln)[k] - lse(b, h, qs)) : 0.f;
                  Pt[r * ld + c] = p;
                  dSt[r * ld + c] = seen ? p * (dP.at(w, ln)[k] - delta(b, h, qs)) : 0.f;
                }
              });
              warp_sync();
              warp_product<ExecSpace, NT>(
                  dV, w, used, BK, [&](int r, int q) { return Pt[r * ld + q]; },
                  [&](int q, int d) { return float(dout(b, clamp_row(q0 + q, T), oc + d)); });
              warp_product<ExecSpace, NT>(
                  dK, w, used, BK, [&](int r, int q) { return dSt[r * ld + q]; },
                  [&](int q, int d) { return float(qkv(b, clamp_row(q0 + q, T), qc + d)); });
              warp_sync();  // Pt and dSt are rewritten by the next tile
            }
          }
          each_lane<ExecSpace>([&](int ln) {
            KFORMER_TC_UNROLL
            for (int k = 0; k < 4 * NT; ++k) {
              const int key = j0 + mma_c_row(ln, k & 3), d = 8 * (k >> 2) + mma_c_col(ln, k & 3);
              if (key <= last && d < hd) {
                dqkv(b, key, kc + d) = TD(scale * dK.at(w, ln)[k]);
                dqkv(b, key, vc + d) = TD(dV.at(w, ln)[k]);
              }
            }
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
  constexpr int NW = C::warps, BQ = C::BQ, BK = C::BK, KT = BK / 8, ld = BK + C::pad;
  const int T = static_cast<int>(qkv.extent(1)), H = L.H, hd = L.hd, used = hd / 8;
  const int tiles = (T + BQ - 1) / BQ;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  tc_launch<C>(
      "kformer::attention_fused_dq", exec, static_cast<int>(qkv.extent(0)) * H * tiles, NW * 16 * ld,
      KOKKOS_LAMBDA(const TcTeam<ExecSpace>& team, float* scratch) {
        const Tile tile = tile_of(team.league_rank(), tiles, H, BQ, T, true);
        const int b = tile.b, h = tile.h, qc = L.q_col(h), oc = h * hd;
        const int kc = L.k_col(L.kv_of(h)), vc = L.v_col(L.kv_of(h));
        WarpRegs<ExecSpace, NW, 4 * NT> dQ;
        WarpRegs<ExecSpace, NW, 4 * KT> S, dP;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, NW), [&](const int w) {
          const int r0 = tile.r0 + 16 * w, last = tile.r0 + tile.n - 1;  // the warp's rows r0 .. r0 + 15
          if (r0 > last) return;
          float* dS = scratch + w * 16 * ld;
          const int kend = r0 + 15 < last ? r0 + 15 : last;
          each_lane<ExecSpace>([&](int ln) {
            KFORMER_TC_UNROLL
            for (int k = 0; k < 4 * NT; ++k) dQ.at(w, ln)[k] = 0.f;
          });
          for (int k0 = 0; k0 <= kend; k0 += BK) {
            each_lane<ExecSpace>([&](int ln) {
              KFORMER_TC_UNROLL
              for (int k = 0; k < 4 * KT; ++k) S.at(w, ln)[k] = dP.at(w, ln)[k] = 0.f;
            });
            warp_product<ExecSpace, KT>(
                S, w, KT, hd, [&](int r, int d) { return float(qkv(b, clamp_row(r0 + r, T), qc + d)); },
                [&](int d, int n) { return float(qkv(b, clamp_row(k0 + n, T), kc + d)); });
            warp_product<ExecSpace, KT>(
                dP, w, KT, hd, [&](int r, int d) { return float(dout(b, clamp_row(r0 + r, T), oc + d)); },
                [&](int d, int n) { return float(qkv(b, clamp_row(k0 + n, T), vc + d)); });
            each_lane<ExecSpace>([&](int ln) {
              KFORMER_TC_UNROLL
              for (int k = 0; k < 4 * KT; ++k) {
                const int r = mma_c_row(ln, k & 3), c = 8 * (k >> 2) + mma_c_col(ln, k & 3);
                const int row = r0 + r, key = k0 + c, rs = clamp_row(row, T);
                const bool seen = row <= last && key <= row;
                const float p = seen ? fast_exp(scale * S.at(w, ln)[k] - lse(b, h, rs)) : 0.f;
                dS[r * ld + c] = seen ? p * (dP.at(w, ln)[k] - delta(b, h, rs)) : 0.f;
              }
            });
            warp_sync();
            warp_product<ExecSpace, NT>(
                dQ, w, used, BK, [&](int r, int k) { return dS[r * ld + k]; },
                [&](int k, int d) { return float(qkv(b, clamp_row(k0 + k, T), kc + d)); });
            warp_sync();  // dS is rewritten by the next tile
          }
          each_lane<ExecSpace>([&](int ln) {
            KFORMER_TC_UNROLL
            for (int k = 0; k < 4 * NT; ++k) {
              const int row = r0 + mma_c_row(ln, k & 3), d = 8 * (k >> 2) + mma_c_col(ln, k & 3);
              if (row <= last && d < hd) dqkv(b, row, qc + d) = TD(scale * dQ.at(w, ln)[k]);
            }
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
