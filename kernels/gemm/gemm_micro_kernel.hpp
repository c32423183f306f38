// The pieces the host's native GEMM drivers (gemm_native.hpp) are built from: the MR x NR
// register micro-kernel and the packing of one operand panel (tile sizes in gemm_tiles.hpp, the
// write-back into C in gemm_epilogue.hpp).
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

#include "gemm_tiles.hpp"

#if KFORMER_HAVE_AVX2_MICRO_KERNEL
#include <immintrin.h>
#endif

#if defined(__CUDACC__) || defined(__clang__)
#define KFORMER_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define KFORMER_UNROLL _Pragma("GCC unroll 32")
#else
#define KFORMER_UNROLL
#endif

namespace kformer::kernels {

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
#if KFORMER_HAVE_AVX2_MICRO_KERNEL
// The AVX2 micro-kernel (GemmHostTiles' 6 x 16 there), as BLIS's Haswell sgemm: 12 accumulators,
// per k two loads of B, six broadcasts of A and twelve FMAs; 15 of the 16 ymm registers. Same sums
// in the same order as the plain loops (one FMA per k into each accumulator). A is prefetched 64 k
// ahead and B 32 k ahead (1.5 and 2 KiB): the panels' streams restart at every call, too short for
// the hardware prefetcher (+0.03-0.1 of OpenBLAS at the layer shapes; a prefetch never faults, so
// addresses past a panel's end are harmless).
__attribute__((noinline)) inline void gemm_micro_kernel_avx2_6x16(int kc, const float* __restrict ap,
                                                                   const float* __restrict bp, float (&out)[6][16]) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps();
  __m256 c11 = _mm256_setzero_ps(), c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c40 = _mm256_setzero_ps();
  __m256 c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int k = 0; k < kc; ++k, ap += 6, bp += 16) {
    _mm_prefetch(reinterpret_cast<const char*>(ap + 384), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(bp + 512), _MM_HINT_T0);
    const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
    __m256 a = _mm256_broadcast_ss(ap);
    c00 = _mm256_fmadd_ps(a, b0, c00), c01 = _mm256_fmadd_ps(a, b1, c01);
    a = _mm256_broadcast_ss(ap + 1);
    c10 = _mm256_fmadd_ps(a, b0, c10), c11 = _mm256_fmadd_ps(a, b1, c11);
    a = _mm256_broadcast_ss(ap + 2);
    c20 = _mm256_fmadd_ps(a, b0, c20), c21 = _mm256_fmadd_ps(a, b1, c21);
    a = _mm256_broadcast_ss(ap + 3);
    c30 = _mm256_fmadd_ps(a, b0, c30), c31 = _mm256_fmadd_ps(a, b1, c31);
    a = _mm256_broadcast_ss(ap + 4);
    c40 = _mm256_fmadd_ps(a, b0, c40), c41 = _mm256_fmadd_ps(a, b1, c41);
    a = _mm256_broadcast_ss(ap + 5);
    c50 = _mm256_fmadd_ps(a, b0, c50), c51 = _mm256_fmadd_ps(a, b1, c51);
  }
  _mm256_storeu_ps(out[0], c00), _mm256_storeu_ps(out[0] + 8, c01);
  _mm256_storeu_ps(out[1], c10), _mm256_storeu_ps(out[1] + 8, c11);
  _mm256_storeu_ps(out[2], c20), _mm256_storeu_ps(out[2] + 8, c21);
  _mm256_storeu_ps(out[3], c30), _mm256_storeu_ps(out[3] + 8, c31);
  _mm256_storeu_ps(out[4], c40), _mm256_storeu_ps(out[4] + 8, c41);
  _mm256_storeu_ps(out[5], c50), _mm256_storeu_ps(out[5] + 8, c51);
}
#endif

template <int MR, int NR>
KOKKOS_FUNCTION KFORMER_HOST_NOINLINE void gemm_micro_kernel(int kc, const float* KOKKOS_RESTRICT ap,
                                                             const float* KOKKOS_RESTRICT bp,
                                                             float (&out)[MR][NR]) {
#if KFORMER_HAVE_AVX2_MICRO_KERNEL
  if constexpr (MR == 6 && NR == 16) {
    gemm_micro_kernel_avx2_6x16(kc, ap, bp, out);
    return;
  }
#endif
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

}  // namespace detail
}  // namespace kformer::kernels
