// The pieces both native GEMM drivers (gemm_native.hpp) are built from: the tile sizes per
// execution space, the MR x NR register micro-kernel, the packing of one operand panel, and the
// write-back of a micro-tile into C (alpha, beta, bias, edges).
//
// Packed layouts (what the micro-kernel reads): an A panel holds MR rows of op(A) k-major,
// ap[k * MR + i] = op(A)(m0 + i, k0 + k); a B panel NR columns of op(B), bp[k * NR + j] =
// op(B)(k0 + k, n0 + j). Rows/columns past the matrix edge are packed as zeros, so the
// micro-kernel always runs full MR x NR and only the write-back looks at the edges. Panels are
// always fp32: bf16 operands are widened while packing (exactly), so one micro-kernel serves both
// and accumulates in fp32.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#if defined(__CUDACC__) || defined(__clang__)
#define KFORMER_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define KFORMER_UNROLL _Pragma("GCC unroll 32")
#else
#define KFORMER_UNROLL
#endif

namespace kformer::kernels {

// Tile sizes per execution space.
// Host: MR x NR accumulators fill the vector registers (6 x 2 zmm with AVX-512, 6 x 2 ymm with
// AVX2); a TM x TK block of packed A stays in L2 and one TK x NR panel of B in L1. Both operands
// are packed once per call into a workspace shared by all threads (`shared_pack`), so TM and TN
// only set the size of a work item.
// GPU: 64 x 64 tile per team, 4 x 4 per thread, each team packing its own operands into 16 KiB
// of shared memory (level-0 scratch).
template <class ExecSpace>
struct GemmTiles {
  static constexpr int MR = 8;
#if defined(__AVX512F__)
  static constexpr int NR = 32;
#else
  static constexpr int NR = 16;
#endif
  static constexpr int TM = 24 * MR, TN = 8 * NR, TK = 256;
  static constexpr bool shared_pack = true;
  static constexpr int scratch_level = 1;
};
#if defined(KOKKOS_ENABLE_CUDA)
template <>
struct GemmTiles<Kokkos::Cuda> {
  static constexpr int MR = 4, NR = 4, TM = 64, TN = 64, TK = 32;
  static constexpr bool shared_pack = false;
  static constexpr int scratch_level = 0;
};
#endif

namespace detail {

// acc = A panel (kc x MR) * B panel (kc x NR), both packed k-major. Written so that GCC emits the
// loop of a hand-written micro-kernel (acc in 2 MR vector registers, one broadcast and two FMAs
// per row and k): kept out of line on the host (inlined into a team functor it fell back to
// scalar code), only the MR loops unrolled by pragma (unrolling the NR loops too made GCC
// vectorise across them with permutes and spills). Checked in the assembly.
#if defined(__GNUC__) && !defined(KOKKOS_ENABLE_CUDA)
#define KFORMER_HOST_NOINLINE __attribute__((noinline))
#else
#define KFORMER_HOST_NOINLINE
#endif
template <int MR, int NR>
KOKKOS_FUNCTION KFORMER_HOST_NOINLINE void gemm_micro_kernel(int kc, const float* KOKKOS_RESTRICT ap,
                                                             const float* KOKKOS_RESTRICT bp,
                                                             float (&out)[MR][NR]) {
  float acc[MR][NR];
  KFORMER_UNROLL
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = 0.0f;
  }
  for (int k = 0; k < kc; ++k) {
    const float* ak = ap + k * MR;
    const float* bk = bp + k * NR;
    KFORMER_UNROLL
    for (int i = 0; i < MR; ++i) {
      const float ai = ak[i];
      for (int j = 0; j < NR; ++j) acc[i][j] += ai * bk[j];
    }
  }
  KFORMER_UNROLL
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) out[i][j] = acc[i][j];
  }
}

// Packs one panel: rows [r0, r0 + R) x k [k0, k0 + kc) of a logical matrix L(r, k) =
// src[r * sr + k * sk] (float or bf16, widened to float) into dst[k * R + i] (i = r - r0), zeros
// for rows >= nrows. One of sr, sk
// is 1 (a row-major operand, transposed or not): for sk == 1 the panel is a transpose, for
// sr == 1 a copy of R contiguous floats per k. The transpose walks k outer so that every store
// is R contiguous floats; row-outer orders (one source row at a time, strided stores) measured
// 10-15 % slower on the whole GEMM at 256x4096x4096.
template <int R, class T>
KOKKOS_INLINE_FUNCTION void gemm_pack_panel(float* KOKKOS_RESTRICT dst, const T* KOKKOS_RESTRICT src,
                                            std::int64_t sr, std::int64_t sk, int r0, int nrows, int k0, int kc) {
  const int rows = nrows - r0 < R ? nrows - r0 : R;
  if (sk == 1 && sr != 1) {
    // One contiguous R-float store per k from R rows, the R source lines reused for 16 k; the
    // next lines of every row are prefetched a line ahead (each row is its own page).
    if (rows == R) {
      for (int k = 0; k < kc; ++k) {
        const T* s = src + r0 * sr + k0 + k;
#if defined(__GNUC__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
        if (k % 16 == 0)
          for (int i = 0; i < R; ++i) __builtin_prefetch(s + i * sr + 256 / sizeof(T));
#endif
        float* d = dst + k * R;
        for (int i = 0; i < R; ++i) d[i] = float(s[i * sr]);
      }
    } else {
      for (int k = 0; k < kc; ++k) {
        const T* s = src + r0 * sr + k0 + k;
        float* d = dst + k * R;
        for (int i = 0; i < R; ++i) d[i] = i < rows ? float(s[i * sr]) : 0.0f;
      }
    }
  } else {
    for (int k = 0; k < kc; ++k) {
      const T* s = src + (k0 + k) * sk + r0 * sr;
      float* d = dst + k * R;
      if (rows == R && sr == 1) {
        for (int i = 0; i < R; ++i) d[i] = float(s[i]);
      } else {
        for (int i = 0; i < R; ++i) d[i] = i < rows ? float(s[i * sr]) : 0.0f;
      }
    }
  }
}

// Where a micro-tile's result goes: C(m, n) = c[m * ldc + n], M x N, with alpha, beta, bias.
struct GemmOut {
  float* c;
  std::int64_t ldc;
  const float* bias;  // nullptr or N entries, added to every row
  int M, N;
  float alpha, beta;

  // C tile at (m, n) gets alpha acc: on the first K chunk as C = alpha acc [+ beta C] [+ bias], on
  // later ones C += alpha acc. Every index into acc is a compile-time constant after unrolling,
  // which is what lets the compiler keep acc in registers: edge tiles go through a copy.
  template <int MR, int NR>
  KOKKOS_INLINE_FUNCTION void store(int m, int n, const float (&acc)[MR][NR], bool first) const {
    if (M - m >= MR && N - n >= NR) {
      KFORMER_UNROLL
      for (int i = 0; i < MR; ++i) store_row<NR>(c + (m + i) * ldc + n, n, acc[i], first);
      return;
    }
    float tmp[MR][NR];
    KFORMER_UNROLL
    for (int i = 0; i < MR; ++i) {
      KFORMER_UNROLL
      for (int j = 0; j < NR; ++j) tmp[i][j] = acc[i][j];
    }
    const int mr = M - m < MR ? M - m : MR, nr = N - n < NR ? N - n : NR;
    for (int i = 0; i < mr; ++i) store_row(c + (m + i) * ldc + n, n, tmp[i], first, nr);
  }
  // One row of w (= W when W > 0) results. The loops are left to the vectoriser (an unroll
  // pragma here made GCC emit W scalar stores), with the branches outside them.
  template <int W = 0>
  KOKKOS_INLINE_FUNCTION void store_row(float* KOKKOS_RESTRICT ci, int n, const float* KOKKOS_RESTRICT acc,
                                        bool first, int w = W) const {
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
  }
};

}  // namespace detail
}  // namespace kformer::kernels
