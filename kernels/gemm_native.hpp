// The portable GEMM behind `kernels.gemm=native`: C(M,N) = alpha op(A) op(B) [+ beta C] [+ bias]
// in plain Kokkos. Each team owns one TM x TN tile of C and walks K in chunks of TK: the team
// packs the A chunk into MR-row panels and the B chunk into NR-column panels in scratch memory
// (zero-padded at the edges, so any shape works), then every thread runs an MR x NR register
// micro-kernel over its micro-tiles and adds the result into C. Each element of C is owned by
// one thread and summed in a fixed order, so the result is bitwise reproducible run to run.
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

// Tile sizes per execution space. Host: MR x NR accumulators fill the vector registers (6 x 2
// zmm rows with AVX-512, 6 x 2 ymm with AVX2), the packed A block (TM x TK) and B block (TK x TN)
// stay in L2 and one B panel (TK x NR) in L1. Scratch level 1 on the host: level 0 is capped at
// 32 KiB there.
template <class ExecSpace>
struct GemmTiles {
  static constexpr int MR = 6;
#if defined(__AVX512F__)
  static constexpr int NR = 32;
#else
  static constexpr int NR = 16;
#endif
  static constexpr int TM = 192, TN = 256, TK = 256;
  static constexpr int scratch_level = 1;
};
#if defined(KOKKOS_ENABLE_CUDA)
// GPU: 64 x 64 tile, 4 x 4 per thread, 16 KiB of shared memory per team.
template <>
struct GemmTiles<Kokkos::Cuda> {
  static constexpr int MR = 4, NR = 4, TM = 64, TN = 64, TK = 32;
  static constexpr int scratch_level = 0;
};
#endif

namespace detail {

// acc = A panel (kc x MR, packed k-major) * B panel (kc x NR, packed k-major). Written so that
// GCC emits the loop of a hand-written micro-kernel (acc in 12 vector registers, one broadcast
// and two FMAs per row and k): kept out of line on the host (inlined into the team functor it
// fell back to scalar code), only the MR loops unrolled by pragma (unrolling the NR loops too
// made GCC vectorise across them with permutes and spills). Checked in the assembly.
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

// Packs rows [r0, r0 + rows) x k [k0, k0 + kc) of a logical matrix L(r, k) into panels of R rows:
// dst[(p * kc + k) * R + r % R], zero past `nrows` (the real row count). L(r, k) = src[r * sr + k * sk]:
// one of sr, sk is 1 (row-major source, transposed or not); the loops run along that one.
template <int R, class Member>
KOKKOS_INLINE_FUNCTION void gemm_pack(const Member& team, float* dst, const float* src, std::int64_t sr,
                                      std::int64_t sk, int r0, int rows, int nrows, int k0, int kc) {
  const int npanels = (rows + R - 1) / R;
  if (sk == 1) {
    // Contiguous along k: a transpose. In blocks of 16 k (one cache line of each source row) so
    // that the strided writes of a block stay in L1; one row per thread within a block.
    constexpr int KB = 16;
    for (int kb = 0; kb < kc; kb += KB) {
      const int w = kc - kb < KB ? kc - kb : KB;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, npanels * R), [&](const int r) {
        float* d = dst + ((r / R) * kc + kb) * R + r % R;
        const int row = r0 + r;
        if (row < nrows) {
          const float* s = src + row * sr + k0 + kb;
          for (int k = 0; k < w; ++k) d[k * R] = s[k];
        } else {
          for (int k = 0; k < w; ++k) d[k * R] = 0.0f;
        }
      });
    }
  } else {  // contiguous along r: one k per thread, rows innermost
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, kc), [&](const int k) {
      const float* s = src + (k0 + k) * sk;
      for (int p = 0; p < npanels; ++p) {
        float* d = dst + (p * kc + k) * R;
        for (int i = 0; i < R; ++i) {
          const int row = r0 + p * R + i;
          d[i] = row < nrows ? s[row * sr] : 0.0f;
        }
      }
    });
  }
}

// The team functor. Operands are raw row-major pointers with their (row, k) strides.
template <class ExecSpace>
struct NativeGemm {
  using Tiles = GemmTiles<ExecSpace>;
  using Member = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  static constexpr int MR = Tiles::MR, NR = Tiles::NR, TM = Tiles::TM, TN = Tiles::TN, TK = Tiles::TK;

  const float* a;  // op(A)(m, k) = a[m * a_sm + k * a_sk]
  std::int64_t a_sm, a_sk;
  const float* b;  // op(B)(k, n) = b[n * b_sn + k * b_sk]
  std::int64_t b_sn, b_sk;
  float* c;  // C(m, n) = c[m * ldc + n]
  std::int64_t ldc;
  const float* bias;  // nullptr or N entries, added to every row
  int M, N, K, tiles_n;
  float alpha, beta;

  static std::size_t scratch_bytes() { return sizeof(float) * (std::size_t(TM) * TK + std::size_t(TK) * TN); }

  // C tile at (m, n) gets alpha acc: on the first K chunk as C = alpha acc [+ beta C] [+ bias], on
  // later ones C += alpha acc. Every index into acc is a compile-time constant after unrolling,
  // which is what lets the compiler keep acc in registers: edge tiles go through a copy.
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
  template <int W = 0>
  KOKKOS_INLINE_FUNCTION void store_row(float* ci, int n, const float* acc, bool first, int w = W) const {
    if (!first) {
      KFORMER_UNROLL
      for (int j = 0; j < (W ? W : w); ++j) ci[j] += alpha * acc[j];
      return;
    }
    KFORMER_UNROLL
    for (int j = 0; j < (W ? W : w); ++j) {
      float v = alpha * acc[j];
      if (beta != 0.0f) v += beta * ci[j];  // beta == 0 never reads C (it may hold NaN)
      if (bias) v += bias[n + j];
      ci[j] = v;
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const int m0 = (team.league_rank() / tiles_n) * TM, n0 = (team.league_rank() % tiles_n) * TN;
    const int rows = M - m0 < TM ? M - m0 : TM, cols = N - n0 < TN ? N - n0 : TN;
    const int pm = (rows + MR - 1) / MR, pn = (cols + NR - 1) / NR;
    const int level = Tiles::scratch_level;  // a copy: device code cannot take the member's address
    float* ap = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * TM * TK));
    float* bp = static_cast<float*>(team.team_scratch(level).get_shmem(sizeof(float) * TK * TN));
    int k0 = 0;
    do {  // at least once, so that K == 0 still writes beta C + bias
      const int kc = K - k0 < TK ? K - k0 : TK;
      gemm_pack<MR>(team, ap, a, a_sm, a_sk, m0, rows, M, k0, kc);
      gemm_pack<NR>(team, bp, b, b_sn, b_sk, n0, cols, N, k0, kc);
      team.team_barrier();
      // jr outer: consecutive micro-tiles of one thread share the B panel (kept in L1).
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, pm * pn), [&](const int t) {
        const int jr = t / pm, ir = t % pm;
        float acc[MR][NR];
        gemm_micro_kernel<MR, NR>(kc, ap + ir * kc * MR, bp + jr * kc * NR, acc);
        store(m0 + ir * MR, n0 + jr * NR, acc, k0 == 0);
      });
      team.team_barrier();
      k0 += TK;
    } while (k0 < K);
  }
};

}  // namespace detail

// C(M,N) = alpha op(A) op(B) + beta C (+ bias(N) on every row when bias is not null); raw
// row-major operands given as strides so that any transposition is one call.
template <class ExecSpace>
void gemm_native_raw(const ExecSpace& exec, int M, int N, int K, float alpha, const float* a, std::int64_t a_sm,
                     std::int64_t a_sk, const float* b, std::int64_t b_sk, std::int64_t b_sn, float beta, float* c,
                     std::int64_t ldc, const float* bias) {
  using F = detail::NativeGemm<ExecSpace>;
  if (M == 0 || N == 0) return;
  const int tiles_m = (M + F::TM - 1) / F::TM, tiles_n = (N + F::TN - 1) / F::TN;
  F f{a, a_sm, a_sk, b, b_sn, b_sk, c, ldc, bias, M, N, K, tiles_n, alpha, beta};
  Kokkos::TeamPolicy<ExecSpace> policy(exec, tiles_m * tiles_n, Kokkos::AUTO);
  policy.set_scratch_size(F::Tiles::scratch_level, Kokkos::PerTeam(static_cast<int>(F::scratch_bytes())));
  Kokkos::parallel_for("kformer::gemm_native", policy, f);
}

}  // namespace kformer::kernels
