// The portable GEMM behind `kernels.gemm=native`: C(M,N) = alpha op(A) op(B) [+ beta C] [+ bias]
// [and GELU of it into a second output] in plain Kokkos. Two drivers, picked by the tile
// configuration (gemm_tiles.hpp; GemmTiles<ExecSpace> by default, any other for tests):
//
// - Shared packing (host, GemmHostTiles). Per chunk of K, one parallel_for packs all of op(A)
//   into MR-row panels and all of op(B) into NR-column panels in a workspace; then one team per
//   TM x TN tile of C runs the micro-kernels of gemm_micro_kernel.hpp over those panels. Each
//   operand element is packed once per call; packing per team instead re-packed A N/TN times and
//   B M/TM times and took half the time. Tiles are taken dynamically (teams of a loaded core
//   simply take fewer tiles).
// - Team staging (GPU, GemmGpuTiles): gemm_team.hpp.
//
// Each element of C is owned by one thread of one team and summed in a fixed order (K chunk by
// K chunk, k in order within one), so the result is bitwise reproducible run to run, whatever
// team takes which tile. The epilogue (alpha, beta, bias, GELU) is gemm_epilogue.hpp's.
//
// A and B may be float or bf16 (kernels/bf16.hpp), each on its own: bf16 operands are widened to
// fp32 while packing, so the micro-kernel, the accumulation and C stay fp32. On a host CPU with
// AVX512-BF16, bf16 A and B go to gemm_bf16_dot.hpp instead (packed as bf16, vdpbf16ps).
#pragma once

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "gemm_bf16_dot.hpp"
#include "gemm_epilogue.hpp"
#include "gemm_micro_kernel.hpp"
#include "gemm_team.hpp"
#include "gemm_workspace.hpp"

namespace kformer::kernels {

namespace detail {

// Shared-packing driver, compute step: one team per tile of tm_panels x tn_panels micro-tiles,
// over one K chunk [k0, k0 + kc) already packed: A panel p at ap + p * kc * MR, B panel q at
// bp + q * kc * NR. The chunk is walked in steps of TK so that a B panel step stays in L1.
template <class ExecSpace>
struct SharedPackedGemm {
  using Tiles = GemmHostTiles;
  using Member = typename Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>::member_type;
  static constexpr int MR = Tiles::MR, NR = Tiles::NR, TK = Tiles::TK;

  const float* ap;
  const float* bp;
  GemmOut out;
  int k0, kc, panels_m, panels_n, tm_panels, tn_panels, tiles_m;
  bool last_chunk;  // k0 + kc == K

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    // m fastest: teams that run at the same time read the same B panels.
    const int p0 = (team.league_rank() % tiles_m) * tm_panels, q0 = (team.league_rank() / tiles_m) * tn_panels;
    const int pm = panels_m - p0 < tm_panels ? panels_m - p0 : tm_panels;
    const int pn = panels_n - q0 < tn_panels ? panels_n - q0 : tn_panels;
    int ks = 0;
    do {  // at least once, so that K == 0 still writes beta C + bias
      const int kcs = kc - ks < TK ? kc - ks : TK;
      // jr outer: consecutive micro-tiles of one thread share the B panel (kept in L1). Each
      // thread keeps its micro-tiles from one step to the next: no barrier needed.
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, pm * pn), [&](const int t) {
        const int jr = q0 + t / pm, ir = p0 + t % pm;
        float acc[MR][NR];
#if KFORMER_HAVE_AVX2_MICRO_KERNEL  // the micro-tile's rows of C, which store() reads after the k loop
        if (ir * MR + MR <= out.M && jr * NR + NR <= out.N)
          for (int i = 0; i < MR; ++i) {
            const float* ci = out.c + std::int64_t(ir * MR + i) * out.ldc + jr * NR;
            _mm_prefetch(reinterpret_cast<const char*>(ci), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(ci + NR - 1), _MM_HINT_T0);
          }
#endif
        gemm_micro_kernel<MR, NR>(kcs, ap + (std::int64_t(ir) * kc + ks) * MR,
                                  bp + (std::int64_t(jr) * kc + ks) * NR, acc);
        out.store(ir * MR, jr * NR, acc, k0 + ks == 0, last_chunk && ks + TK >= kc);
      });
      ks += TK;
    } while (ks < kc);
  }
};

// Floats of packed operands per K chunk at most (32 MiB): chunks of K are a multiple of TK that
// fits, so the workspace stays bounded (a Llama FC2, 256 x 14336 x 4096, packs 4352 x 14336
// floats in 8 chunks). Each chunk is two parallel regions; at M = 256 half this budget (twice the
// regions) measured 0.40-0.53 of OpenBLAS against 0.55-0.69 on the loaded 2-core machine.
inline std::int64_t& gemm_pack_budget_floats() {
  static std::int64_t budget = std::int64_t(8) << 20;
  return budget;
}

// The shared-packing driver's K chunk (kcp) and workspace (floats) for C(M, N) over K.
struct SharedPacking {
  int panels_m, panels_n, kcp;
  std::int64_t per_k;  // floats per k
  SharedPacking(int M, int N, int K) {
    using Tiles = GemmHostTiles;
    constexpr int MR = Tiles::MR, NR = Tiles::NR, TK = Tiles::TK;
    panels_m = (M + MR - 1) / MR, panels_n = (N + NR - 1) / NR;
    per_k = std::int64_t(panels_m) * MR + std::int64_t(panels_n) * NR;
    const std::int64_t fit = std::max<std::int64_t>(1, gemm_pack_budget_floats() / (per_k * TK)) * TK;
    kcp = static_cast<int>(std::min<std::int64_t>(fit, std::max(K, 1)));
  }
  std::size_t workspace_floats() const { return std::size_t(per_k) * std::size_t(kcp); }
};

template <class ExecSpace, class TA, class TB>
void gemm_native_shared(const ExecSpace& exec, int M, int N, int K, const TA* a, std::int64_t a_sm,
                        std::int64_t a_sk, const TB* b, std::int64_t b_sk, std::int64_t b_sn,
                        const GemmOut& out) {
  using Tiles = GemmHostTiles;
  constexpr int MR = Tiles::MR, NR = Tiles::NR;
  const SharedPacking pk(M, N, K);
  const int panels_m = pk.panels_m, panels_n = pk.panels_n, kcp = pk.kcp;
  auto ws = GemmWorkspace<typename ExecSpace::memory_space>::get(pk.workspace_floats());
  float* const apk = ws.first;
  float* const bpk = apk + std::int64_t(panels_m) * MR * kcp;
  constexpr int tm_panels = Tiles::TM / MR, tn_panels = Tiles::TN / NR;
  const int tiles_m = (panels_m + tm_panels - 1) / tm_panels, tiles_n = (panels_n + tn_panels - 1) / tn_panels;
  int k0 = 0;
  do {
    const int kc = K - k0 < kcp ? K - k0 : kcp;
    if (kc > 0)
      Kokkos::parallel_for(
          "kformer::gemm_native_pack",
          Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>(exec, 0, panels_m + panels_n),
          KOKKOS_LAMBDA(const int p) {
            if (p < panels_m)
              gemm_pack_panel<MR>(apk + std::int64_t(p) * kc * MR, a, a_sm, a_sk, p * MR, M, k0, kc);
            else
              gemm_pack_panel<NR>(bpk + std::int64_t(p - panels_m) * kc * NR, b, b_sn, b_sk, (p - panels_m) * NR,
                                  N, k0, kc);
          });
    const SharedPackedGemm<ExecSpace> f{apk,      bpk,       out,       k0,      kc,          panels_m,
                                        panels_n, tm_panels, tn_panels, tiles_m, k0 + kc >= K};
    Kokkos::parallel_for("kformer::gemm_native",
                         Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>(
                             exec, tiles_m * tiles_n, Kokkos::AUTO),
                         f);
    k0 += kcp;
  } while (k0 < K);
  detail::release_workspace(exec);  // the workspace goes to the next caller (gemm_workspace.hpp)
}

}  // namespace detail

namespace detail {
// The driver gemm_native_raw takes for A of TA and B of TB with Tiles: the bf16 pair micro-kernel
// (host, AVX512-BF16 on), shared packing (host) or team-scratch tiles (GPUs).
enum class NativePath { bf16_dot, shared, team };
template <class TA, class TB, class Tiles>
NativePath native_path() {
  if constexpr (Tiles::shared_pack) {
    if constexpr (KFORMER_HAVE_BF16_DOT && std::is_same<TA, bf16>::value && std::is_same<TB, bf16>::value)
      if (gemm_bf16_dot_enabled()) return NativePath::bf16_dot;
    return NativePath::shared;
  } else {
    return NativePath::team;
  }
}
}  // namespace detail

// The floats of the packing workspace (gemm_workspace.hpp) gemm_native_raw takes for C(M, N) over
// K, by the path it takes (0 where it packs in team scratch).
template <class ExecSpace, class TA, class Tiles = GemmTiles<ExecSpace>>
std::size_t gemm_native_workspace_floats(int M, int N, int K) {
  if (M == 0 || N == 0) return 0;
  switch (detail::native_path<TA, TA, Tiles>()) {
    case detail::NativePath::bf16_dot: return detail::bf16_dot_workspace_floats(detail::gemm_pack_budget_floats(), M, N, K);
    case detail::NativePath::shared: return detail::SharedPacking(M, N, K).workspace_floats();
    case detail::NativePath::team: break;
  }
  return 0;
}

// C = alpha op(A) op(B) + beta C with out's epilogue (M, N, alpha, beta, bias and activation in
// out); raw row-major operands given as strides so that any transposition is one call:
// op(A)(m, k) = a[m * a_sm + k * a_sk], op(B)(k, n) = b[k * b_sk + n * b_sn]. A and B: float or
// bf16. Tiles: the tile configuration (gemm_tiles.hpp); tests give the GPU's on the host.
template <class ExecSpace, class TA, class TB, class Tiles = GemmTiles<ExecSpace>>
void gemm_native_raw(const ExecSpace& exec, int K, const TA* a, std::int64_t a_sm, std::int64_t a_sk, const TB* b,
                     std::int64_t b_sk, std::int64_t b_sn, const detail::GemmOut& out) {
  if (out.M == 0 || out.N == 0) return;
  if constexpr (Tiles::shared_pack) {
    if constexpr (KFORMER_HAVE_BF16_DOT && std::is_same<TA, bf16>::value && std::is_same<TB, bf16>::value) {
      if (detail::native_path<TA, TB, Tiles>() == detail::NativePath::bf16_dot) {
        detail::gemm_native_bf16_dot(exec, detail::gemm_pack_budget_floats(), out.M, out.N, K, a, a_sm, a_sk, b, b_sk,
                                     b_sn, out);
        return;
      }
    }
    detail::gemm_native_shared(exec, out.M, out.N, K, a, a_sm, a_sk, b, b_sk, b_sn, out);
  } else {
    detail::gemm_native_team<Tiles>(exec, K, a, a_sm, a_sk, b, b_sk, b_sn, out);
  }
}

}  // namespace kformer::kernels
