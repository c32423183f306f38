// The host native GEMM for bf16 A and B on CPUs with AVX512-BF16: vdpbf16ps multiplies pairs of
// bf16 and adds both products into fp32 lanes, twice the multiply-adds per instruction of the
// fp32 micro-kernel, on operands packed as bf16 (half the bytes). Chosen at run time
// (__builtin_cpu_supports("avx512bf16")): the build machine and the one that runs differ (Zen 3
// has AVX2 only, Ice Lake AVX-512 without BF16), so only the micro-kernel is compiled for the
// extension (a target attribute), and every other CPU keeps the widening path of gemm_native.hpp.
//
// Packed layouts, k in pairs (kk = k / 2, t = k % 2), zeros past the edges and for an odd last k:
//   A panel: ap[(kk * MR + i) * 2 + t] = op(A)(m0 + i, k0 + k)   (a 32-bit pair per row, broadcast)
//   B panel: bp[(kk * NR + j) * 2 + t] = op(B)(k0 + k, n0 + j)   (NR pairs: two zmm per kk)
// Numerics: products of bf16 are exact in fp32 and accumulate in fp32, as on the widening path,
// but in another order (each lane adds the pair's two products in turn) and with vdpbf16ps's
// denormal handling (subnormal inputs and results are flushed to zero), so the two paths agree
// within the fp32 accumulation bound, not bitwise. Each element is still summed in a fixed order.
#pragma once

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bf16.hpp"
#include "gemm_epilogue.hpp"
#include "gemm_micro_kernel.hpp"
#include "gemm_workspace.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(KOKKOS_ENABLE_CUDA) && !defined(KOKKOS_ENABLE_HIP) && \
    ((defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10) || (defined(__clang__) && __clang_major__ >= 9))
#define KFORMER_HAVE_BF16_DOT 1
#include <immintrin.h>
#else
#define KFORMER_HAVE_BF16_DOT 0
#endif

namespace kformer::kernels::detail {

// Tests switch the AVX512-BF16 path off to compare it with the widening path on the same CPU.
// KFORMER_GEMM_BF16_DOT=0 in the environment starts it false: a whole run, or the suite, then takes
// the widening path that CPUs without AVX512-BF16 take, so both paths are checked on one machine.
inline bool& gemm_bf16_dot_allowed() {
  static bool allowed = [] {
    const char* e = std::getenv("KFORMER_GEMM_BF16_DOT");
    return !(e && e[0] == '0' && e[1] == '\0');
  }();
  return allowed;
}

// Whether this CPU runs vdpbf16ps (and this build has the micro-kernel).
inline bool cpu_has_avx512_bf16() {
#if KFORMER_HAVE_BF16_DOT
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return has;
#else
  return false;
#endif
}

inline bool gemm_bf16_dot_enabled() { return gemm_bf16_dot_allowed() && cpu_has_avx512_bf16(); }

struct Bf16DotTiles {
  static constexpr int MR = 8, NR = 32;  // 16 zmm accumulators; NR = two zmm of 16 pairs
  static constexpr int TM = 24 * MR, TN = 8 * NR, TK = 512;  // k: the fp32 path's bytes per B panel step (32 KiB)
};

#if KFORMER_HAVE_BF16_DOT
// acc = A panel (kp pairs x MR) * B panel (kp pairs x NR); the micro-kernel of this file.
__attribute__((target("avx512bf16,avx512f,avx512bw"), noinline)) inline void gemm_bf16_dot_micro_kernel(
    int kp, const std::uint16_t* __restrict ap, const std::uint16_t* __restrict bp, float (&out)[8][32]) {
  __m512 acc[8][2];
  for (int i = 0; i < 8; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int kk = 0; kk < kp; ++kk) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + kk * 64);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + kk * 64 + 32);
    const std::uint16_t* a = ap + kk * 16;
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      std::int32_t pair;
      std::memcpy(&pair, a + 2 * i, sizeof pair);
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(pair);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  for (int i = 0; i < 8; ++i) {
    _mm512_storeu_ps(&out[i][0], acc[i][0]);
    _mm512_storeu_ps(&out[i][16], acc[i][1]);
  }
}
#else
inline void gemm_bf16_dot_micro_kernel(int, const std::uint16_t*, const std::uint16_t*, float (&)[8][32]) {}
#endif

// Packs rows [r0, r0 + R) x k [k0, k0 + kc) of L(r, k) = src[r * sr + k * sk] into pairs (see the
// file comment); kc may be odd (the last pair gets a zero). A pair is one 32-bit word of dst.
// Two layouts have fast loops, as a weight-sized pack costs as much as the multiply-adds when
// only a few hundred tokens share it (B*T = 256 at the GPT-2 step): k contiguous (sk == 1, a
// row-major operand read along its rows: each pair is one 32-bit load) and rows contiguous
// (sr == 1, a transposed operand: two source rows k, k+1 interleaved, which vectorises). Any
// other stride takes the element-by-element loop; all three write the same words.
template <int R>
inline void gemm_pack_pairs(std::uint32_t* __restrict dst, const bf16* __restrict src, std::int64_t sr,
                            std::int64_t sk, int r0, int nrows, int k0, int kc) {
  const int rows = nrows - r0 < R ? nrows - r0 : R;
  const int kp = (kc + 1) / 2, kfull = kc / 2;  // pairs; pairs with both halves inside
  const std::uint16_t* const s16 = &src->bits;   // bf16 is exactly its 16 bits
  if (sk == 1) {
    // A pair per row and k step: the R rows are R streams of a cache line per 32 k, each too
    // short for the hardware prefetcher (a K chunk is a few hundred k), so every row's next lines
    // are prefetched four lines ahead, as in gemm_pack_panel.
    for (int kk = 0; kk < kfull; ++kk) {
      const std::uint16_t* s = s16 + std::int64_t(r0) * sr + k0 + 2 * kk;
#if defined(__GNUC__)
      if (kk % 16 == 0)
        for (int i = 0; i < rows; ++i) __builtin_prefetch(s + i * sr + 128);
#endif
      std::uint32_t* d = dst + kk * R;
      for (int i = 0; i < rows; ++i) std::memcpy(d + i, s + i * sr, sizeof(std::uint32_t));  // k in the low half
    }
    if (kfull < kp)
      for (int i = 0; i < rows; ++i) dst[kfull * R + i] = s16[(r0 + i) * sr + k0 + kc - 1];
  } else if (sr == 1) {
    for (int kk = 0; kk < kp; ++kk) {
      const std::uint16_t* s0 = s16 + (k0 + 2 * kk) * sk + r0;
      std::uint32_t* d = dst + kk * R;
      if (kk < kfull) {
        const std::uint16_t* s1 = s0 + sk;
        for (int i = 0; i < rows; ++i) d[i] = std::uint32_t(s0[i]) | std::uint32_t(s1[i]) << 16;
      } else {
        for (int i = 0; i < rows; ++i) d[i] = s0[i];
      }
    }
  } else {
    for (int kk = 0; kk < kp; ++kk)
      for (int i = 0; i < rows; ++i) {
        const std::uint16_t* s = s16 + (r0 + i) * sr + (k0 + 2 * kk) * sk;
        dst[kk * R + i] = std::uint32_t(s[0]) | (2 * kk + 1 < kc ? std::uint32_t(s[sk]) << 16 : 0u);
      }
  }
  for (int kk = 0; kk < kp; ++kk)  // rows past the edge: zeros
    for (int i = rows; i < R; ++i) dst[kk * R + i] = 0;
}

// The shared-packing driver of gemm_native.hpp with pair panels and the bf16 micro-kernel (host
// execution spaces only); budget_floats bounds the packed operands of one K chunk, as there.
// Its K chunk (kcp, even unless kcp == K) and workspace (floats: two bf16 in each).
struct PairPacking {
  int panels_m, panels_n, kcp;
  std::int64_t per_k, kcp_even;  // bf16 per k
  PairPacking(std::int64_t budget_floats, int M, int N, int K) {
    constexpr int MR = Bf16DotTiles::MR, NR = Bf16DotTiles::NR, TK = Bf16DotTiles::TK;
    panels_m = (M + MR - 1) / MR, panels_n = (N + NR - 1) / NR;
    per_k = std::int64_t(panels_m) * MR + std::int64_t(panels_n) * NR;
    const std::int64_t fit = std::max<std::int64_t>(1, 2 * budget_floats / (per_k * TK)) * TK;
    kcp = static_cast<int>(std::min<std::int64_t>(fit, std::max(K, 1)));
    kcp_even = kcp + (kcp & 1);
  }
  std::size_t workspace_floats() const { return std::size_t(per_k * kcp_even + 1) / 2; }
};
inline std::size_t bf16_dot_workspace_floats(std::int64_t budget_floats, int M, int N, int K) {
  return PairPacking(budget_floats, M, N, K).workspace_floats();
}

template <class ExecSpace>
void gemm_native_bf16_dot(const ExecSpace& exec, std::int64_t budget_floats, int M, int N, int K, const bf16* a,
                          std::int64_t a_sm,
                          std::int64_t a_sk, const bf16* b, std::int64_t b_sk, std::int64_t b_sn, const GemmOut& out) {
  constexpr int MR = Bf16DotTiles::MR, NR = Bf16DotTiles::NR, TK = Bf16DotTiles::TK;
  const PairPacking pk(budget_floats, M, N, K);
  const int panels_m = pk.panels_m, panels_n = pk.panels_n, kcp = pk.kcp;
  const std::int64_t kcp_even = pk.kcp_even;
  auto ws = GemmWorkspace<typename ExecSpace::memory_space>::get(pk.workspace_floats());
  auto* const apk = reinterpret_cast<std::uint16_t*>(ws.first);
  std::uint16_t* const bpk = apk + std::int64_t(panels_m) * MR * kcp_even;
  constexpr int tm_panels = Bf16DotTiles::TM / MR, tn_panels = Bf16DotTiles::TN / NR;
  const int tiles_m = (panels_m + tm_panels - 1) / tm_panels, tiles_n = (panels_n + tn_panels - 1) / tn_panels;
  using Dynamic = Kokkos::Schedule<Kokkos::Dynamic>;
  int k0 = 0;
  do {
    const int kc = K - k0 < kcp ? K - k0 : kcp;
    const int kp = (kc + 1) / 2;  // pairs in this chunk
    if (kc > 0)
      Kokkos::parallel_for(
          "kformer::gemm_native_bf16_pack", Kokkos::RangePolicy<ExecSpace, Dynamic>(exec, 0, panels_m + panels_n),
          [=](const int p) {
            if (p < panels_m)
              gemm_pack_pairs<MR>(reinterpret_cast<std::uint32_t*>(apk + std::int64_t(p) * kp * MR * 2), a, a_sm, a_sk,
                                  p * MR, M, k0, kc);
            else
              gemm_pack_pairs<NR>(reinterpret_cast<std::uint32_t*>(bpk + std::int64_t(p - panels_m) * kp * NR * 2), b,
                                  b_sn, b_sk, (p - panels_m) * NR, N, k0, kc);
          });
    // One work item per tile of tm_panels x tn_panels micro-tiles, m fastest (items running at
    // the same time share B panels); the chunk is walked in TK steps so a B panel step stays in L1.
    Kokkos::parallel_for(
        "kformer::gemm_native_bf16", Kokkos::RangePolicy<ExecSpace, Dynamic>(exec, 0, tiles_m * tiles_n),
        [=](const int tile) {
          const int p0 = (tile % tiles_m) * tm_panels, q0 = (tile / tiles_m) * tn_panels;
          const int pm = panels_m - p0 < tm_panels ? panels_m - p0 : tm_panels;
          const int pn = panels_n - q0 < tn_panels ? panels_n - q0 : tn_panels;
          int ks = 0;
          do {  // at least once, so that K == 0 still writes beta C + bias
            const int kps = kp - ks < TK / 2 ? kp - ks : TK / 2;
            for (int t = 0; t < pm * pn; ++t) {
              const int jr = q0 + t / pm, ir = p0 + t % pm;
              float acc[MR][NR];
              gemm_bf16_dot_micro_kernel(kps, apk + (std::int64_t(ir) * kp + ks) * MR * 2,
                                         bpk + (std::int64_t(jr) * kp + ks) * NR * 2, acc);
              out.store(ir * MR, jr * NR, acc, k0 + ks == 0, k0 + kc >= K && ks + TK / 2 >= kp);
            }
            ks += TK / 2;
          } while (ks < kp);
        });
    k0 += kcp;
  } while (k0 < K);
  detail::release_workspace(exec);  // the workspace goes to the next caller (gemm_workspace.hpp)
}

}  // namespace kformer::kernels::detail
