// Where the native GEMM's results go, and what happens to them on the way (the epilogue):
// C(m, n) = c[m * ldc + n], M x N, gets alpha acc + beta C + bias(n) (beta == 0 never reads C; the
// bias is optional), and where an activation output is set (act32 or act16, row-major with
// leading dimension ldact) it also gets GELU of that result, C keeping the pre-activation that
// the backward needs. The GELU is computed from the result rounded to the activation's type
// (a no-op for fp32): what a layer that keeps its pre-activation in bf16 and runs gelu_forward
// on it stores, bit for bit. Arithmetic in fp32.
//
// The host drivers write a micro-tile per K chunk (store(): the first chunk applies beta and the
// bias, the last one the activation); the team driver writes each element once, its whole sum
// over K in hand (put_run()).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "activations.hpp"
#include "bf16.hpp"
#include "gemm_micro_kernel.hpp"
#include "run_access.hpp"

namespace kformer::kernels::detail {

struct GemmOut {
  float* c;
  std::int64_t ldc;
  const float* bias;  // nullptr or N entries, added to every row
  int M, N;
  float alpha, beta;
  float* act32 = nullptr;  // at most one of act32, act16: GELU of the result
  bf16* act16 = nullptr;
  std::int64_t ldact = 0;

  KOKKOS_INLINE_FUNCTION bool has_act() const { return act32 != nullptr || act16 != nullptr; }

  // The activation of C's final values ci[0, w) of row m from column n.
  KOKKOS_INLINE_FUNCTION void act_row(int m, int n, const float* KOKKOS_RESTRICT ci, int w) const {
    if (act32) {
      float* KOKKOS_RESTRICT d = act32 + m * ldact + n;
      for (int j = 0; j < w; ++j) d[j] = gelu_value(ci[j]);
    } else if (act16) {
      bf16* KOKKOS_RESTRICT d = act16 + m * ldact + n;
      for (int j = 0; j < w; ++j) d[j] = bf16(gelu_value(round_to_bf16(ci[j])));
    }
  }

  // Host drivers: the C tile at (m, n) gets alpha acc: on the first K chunk as C = alpha acc
  // [+ beta C] [+ bias], on later ones C += alpha acc; on the last one the activation follows.
  // Every index into acc is a compile-time constant after unrolling, which is what lets the
  // compiler keep acc in registers: edge tiles go through a copy.
  template <int MR, int NR>
  KOKKOS_INLINE_FUNCTION void store(int m, int n, const float (&acc)[MR][NR], bool first, bool last) const {
    if (M - m >= MR && N - n >= NR) {
      KFORMER_UNROLL
      for (int i = 0; i < MR; ++i) store_row<NR>(c + (m + i) * ldc + n, m + i, n, acc[i], first, last);
      return;
    }
    float tmp[MR][NR];
    KFORMER_UNROLL
    for (int i = 0; i < MR; ++i) {
      KFORMER_UNROLL
      for (int j = 0; j < NR; ++j) tmp[i][j] = acc[i][j];
    }
    const int mr = M - m < MR ? M - m : MR, nr = N - n < NR ? N - n : NR;
    for (int i = 0; i < mr; ++i) store_row(c + (m + i) * ldc + n, m + i, n, tmp[i], first, last, nr);
  }
  // One row of w (= W when W > 0) results. The loops are left to the vectoriser (an unroll
  // pragma here made GCC emit W scalar stores), with the branches outside them.
  template <int W = 0>
  KOKKOS_INLINE_FUNCTION void store_row(float* KOKKOS_RESTRICT ci, int m, int n, const float* KOKKOS_RESTRICT acc,
                                        bool first, bool last, int w = W) const {
    const int nw = W ? W : w;
    if (!first) {
      for (int j = 0; j < nw; ++j) ci[j] += alpha * acc[j];
    } else if (beta == 0.0f && !bias) {  // beta == 0 never reads C (it may hold NaN)
      for (int j = 0; j < nw; ++j) ci[j] = alpha * acc[j];
    } else if (beta == 0.0f) {
      const float* KOKKOS_RESTRICT bn = bias + n;
      for (int j = 0; j < nw; ++j) ci[j] = alpha * acc[j] + bn[j];
    } else {
      for (int j = 0; j < nw; ++j) ci[j] = alpha * acc[j] + beta * ci[j] + (bias ? bias[n + j] : 0.0f);
    }
    if (last && has_act()) act_row(m, n, ci, nw);
  }

  // Team driver: C(m, n + j) for j < w <= 4 from its whole sums acc[j] (the same expressions as
  // store_row's first chunk); a 128-bit access on a GPU when the four are in C and aligned.
  KOKKOS_INLINE_FUNCTION void put_run(int m, int n, const float* acc, int w) const {
    float* ci = c + m * ldc + n;
    float v[4];
    const bool whole = w == 4 && (reinterpret_cast<std::uintptr_t>(ci) & 15) == 0;
    if (beta != 0.0f) {
      if (whole)
        load_run<4>(v, ci);  // four adjacent floats: one 128-bit access on a GPU
      else
        for (int j = 0; j < w; ++j) v[j] = ci[j];
    }
    for (int j = 0; j < 4; ++j) {
      if (j < w) {
        if (beta == 0.0f)
          v[j] = bias ? alpha * acc[j] + bias[n + j] : alpha * acc[j];
        else
          v[j] = alpha * acc[j] + beta * v[j] + (bias ? bias[n + j] : 0.0f);
      }
    }
    if (whole)
      store_run<4>(ci, v);
    else
      for (int j = 0; j < w; ++j) ci[j] = v[j];
    if (has_act()) act_row(m, n, v, w);
  }
};

}  // namespace kformer::kernels::detail
