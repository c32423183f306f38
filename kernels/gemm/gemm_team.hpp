// The team driver of the native GEMM, the one GPUs run (GemmTeamTiles in gemm_tiles.hpp):
// one team per TM x TN tile of C, whose threads
//   1. stage op(A)'s and op(B)'s chunk of TK k into team scratch, k-major (As[k][m], Bs[k][n]),
//      widening bf16 to fp32; the element a thread loads is chosen so that consecutive threads
//      read consecutive addresses along the operand's contiguous dimension (k for a row-major A
//      or a transposed B, m or n otherwise), whatever the transposition: coalesced;
//   2. each update an RM x RN micro-tile of accumulators in registers, per k one outer product of
//      RM values of As and RN of Bs read as float4s (see GemmTeamTiles for the bank layout);
//   3. double-buffer: the next chunk is loaded into registers before the current one is used and
//      stored to the other scratch buffer after, so one barrier per chunk separates the two;
//   4. write alpha acc + beta C + bias (and GELU, gemm_epilogue.hpp) once, after the last chunk.
// Each element of C is one thread's one accumulator, summed k = 0, 1, ..., K - 1 in order, so the
// result is bitwise reproducible and the same for every tile configuration.
//
// The kernel is written per logical thread t < threads: on a GPU team member t is thread t (the
// team has exactly `threads` members and each keeps its state in registers); on a host backend a
// team has fewer members, each running several logical threads in turn with their state in an
// array, so that the tests run the GPU's configuration, barriers included, on Serial and OpenMP.
#pragma once

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>

#include "gemm_epilogue.hpp"
#include "gemm_tiles.hpp"
#include "view_types.hpp"

namespace kformer::kernels::detail {

// a * b + c rounded once, whatever the compiler's contraction of a * b + c would have been
// (GCC contracted the update in some configurations and not in others).
KOKKOS_INLINE_FUNCTION float fma_f32(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

template <class ExecSpace, class Cfg, class TA, class TB>
struct TeamGemm {
  // At most 128 registers a thread, so that two teams fit on an SM.
  using Policy = Kokkos::TeamPolicy<ExecSpace, Kokkos::LaunchBounds<Cfg::threads, 2>>;
  using Member = typename Policy::member_type;
  static constexpr int TM = Cfg::TM, TN = Cfg::TN, TK = Cfg::TK, RM = Cfg::RM, RN = Cfg::RN, V = Cfg::V;
  static constexpr int TX = Cfg::TX, TY = Cfg::TY, SA = Cfg::stage_a, SB = Cfg::stage_b;
  // Logical threads one team member runs: 1 on a GPU, up to all of them on the host.
  static constexpr int per_member = runs_on_host<ExecSpace> ? Cfg::threads : 1;

  const TA* a;  // op(A)(m, k) = a[m * a_sm + k * a_sk]; a_sm or a_sk is 1
  std::int64_t a_sm, a_sk;
  const TB* b;  // op(B)(k, n) = b[n * b_sn + k * b_sk]; b_sn or b_sk is 1
  std::int64_t b_sn, b_sk;
  GemmOut out;
  int K, tiles_n;

  // What one logical thread carries from one chunk to the next.
  struct State {
    float acc[RM][RN];
    float na[SA], nb[SB];  // the next chunk's elements, between load and store
  };

  // Logical thread t stages elements s = 0, 1, ... of an R-row operand chunk at (r + s dr, k + s dk):
  // contiguous along k (sk == 1), TK k of one row side by side, then the next row; otherwise R rows
  // side by side, then the next k. Consecutive threads: consecutive addresses.
  template <int R>
  KOKKOS_INLINE_FUNCTION static void first_and_step(bool k_contiguous, int t, int& r, int& k, int& dr, int& dk) {
    if (k_contiguous)
      r = t / TK, k = t % TK, dr = Cfg::threads / TK, dk = 0;
    else
      r = t % R, k = t / R, dr = 0, dk = Cfg::threads / R;
  }

  // Loads logical thread t's elements of the R x TK chunk at (r0, k0) of L(r, k) = src[r * sr +
  // k * sk] into reg, widened to fp32, zeros outside the nrows x K matrix.
  template <int R, int S, class T>
  KOKKOS_INLINE_FUNCTION void load(float (&reg)[S], const T* src, std::int64_t sr, std::int64_t sk, int r0,
                                   int nrows, int k0, int t) const {
    int r, k, dr, dk;
    first_and_step<R>(sk == 1, t, r, k, dr, dk);
    r += r0, k += k0;
    const T* p = src + r * sr + k * sk;
    const std::int64_t dp = dr * sr + dk * sk;
    for (int s = 0; s < S; ++s)
      reg[s] = r + s * dr < nrows && k + s * dk < K ? float(p[s * dp]) : 0.0f;
  }
  // Stores them k-major into dst (row length ld).
  template <int R, int S>
  KOKKOS_INLINE_FUNCTION static void store(float* dst, int ld, const float (&reg)[S], bool k_contiguous, int t) {
    int r, k, dr, dk;
    first_and_step<R>(k_contiguous, t, r, k, dr, dk);
    for (int s = 0; s < S; ++s) dst[(k + s * dk) * ld + r + s * dr] = reg[s];
  }

  // kc k of the outer products of logical thread t = (ty, tx) from the chunk in as / bs.
  template <int KC>
  KOKKOS_INLINE_FUNCTION static void update(State& st, const float* as, const float* bs, int ty, int tx, int kc) {
    const int n = KC ? KC : kc;
    for (int k = 0; k < n; ++k) {
      float av[RM], bv[RN];
      KFORMER_UNROLL
      for (int g = 0; g < RM / V; ++g) load_run<4>(av + g * V, as + k * Cfg::lda + g * TY * V + ty * V);
      KFORMER_UNROLL
      for (int g = 0; g < RN / V; ++g) load_run<4>(bv + g * V, bs + k * Cfg::ldb + g * TX * V + tx * V);
      KFORMER_UNROLL
      for (int i = 0; i < RM; ++i) {
        KFORMER_UNROLL
        for (int j = 0; j < RN; ++j) st.acc[i][j] = fma_f32(av[i], bv[j], st.acc[i][j]);
      }
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const int m0 = (team.league_rank() / tiles_n) * TM, n0 = (team.league_rank() % tiles_n) * TN;
    float* const scratch = static_cast<float*>(team.team_scratch(0).get_shmem(std::size_t(Cfg::scratch_bytes)));
    constexpr int buf = TK * (Cfg::lda + Cfg::ldb);  // floats of one buffer: As then Bs
    const int members = team.team_size(), rank = team.team_rank();
    const int mine = (Cfg::threads - rank + members - 1) / members;  // logical threads rank + l * members
    const bool ak = a_sk == 1, bk = b_sk == 1;
    const int chunks = (K + TK - 1) / TK;

    State st[per_member];
    for (int l = 0; l < per_member && l < mine; ++l) {
      const int t = rank + l * members;
      KFORMER_UNROLL
      for (int i = 0; i < RM; ++i) {
        KFORMER_UNROLL
        for (int j = 0; j < RN; ++j) st[l].acc[i][j] = 0.0f;
      }
      if (chunks > 0) {
        load<TM>(st[l].na, a, a_sm, a_sk, m0, out.M, 0, t);
        load<TN>(st[l].nb, b, b_sn, b_sk, n0, out.N, 0, t);
        store<TM>(scratch, Cfg::lda, st[l].na, ak, t);
        store<TN>(scratch + TK * Cfg::lda, Cfg::ldb, st[l].nb, bk, t);
      }
    }
    team.team_barrier();
    for (int ch = 0; ch < chunks; ++ch) {
      const bool more = ch + 1 < chunks;
      const int kc = K - ch * TK < TK ? K - ch * TK : TK;
      const float* as = scratch + (ch % 2) * buf;
      float* const next = scratch + ((ch + 1) % 2) * buf;
      for (int l = 0; l < per_member && l < mine; ++l) {
        const int t = rank + l * members;
        if (more) {  // issued before the arithmetic, so that the loads are in flight during it
          load<TM>(st[l].na, a, a_sm, a_sk, m0, out.M, (ch + 1) * TK, t);
          load<TN>(st[l].nb, b, b_sn, b_sk, n0, out.N, (ch + 1) * TK, t);
        }
        if (kc == TK)
          update<TK>(st[l], as, as + TK * Cfg::lda, t / TX, t % TX, kc);
        else
          update<0>(st[l], as, as + TK * Cfg::lda, t / TX, t % TX, kc);
        if (more) {
          store<TM>(next, Cfg::lda, st[l].na, ak, t);
          store<TN>(next + TK * Cfg::lda, Cfg::ldb, st[l].nb, bk, t);
        }
      }
      team.team_barrier();  // this chunk read by all, the next one stored by all
    }
    for (int l = 0; l < per_member && l < mine; ++l) {
      const int t = rank + l * members, ty = t / TX, tx = t % TX;
      KFORMER_UNROLL
      for (int i = 0; i < RM; ++i) {
        const int m = m0 + (i / V) * TY * V + ty * V + i % V;
        if (m >= out.M) continue;
        KFORMER_UNROLL
        for (int g = 0; g < RN / V; ++g) {
          const int n = n0 + g * TX * V + tx * V;
          if (n < out.N) out.put_run(m, n, st[l].acc[i] + g * V, out.N - n < V ? out.N - n : V);
        }
      }
    }
  }
};

// The team driver with configuration Cfg: one team of Cfg::threads threads per tile on a GPU, as
// many as the backend allows (at most Cfg::threads) on the host.
template <class Cfg, class ExecSpace, class TA, class TB>
void gemm_native_team_cfg(const ExecSpace& exec, int K, const TA* a, std::int64_t a_sm, std::int64_t a_sk, const TB* b,
                          std::int64_t b_sk, std::int64_t b_sn, const GemmOut& out) {
  using F = TeamGemm<ExecSpace, Cfg, TA, TB>;
  const int tiles_m = (out.M + Cfg::TM - 1) / Cfg::TM, tiles_n = (out.N + Cfg::TN - 1) / Cfg::TN;
  const F f{a, a_sm, a_sk, b, b_sn, b_sk, out, K, tiles_n};
  int members = Cfg::threads;
  if constexpr (runs_on_host<ExecSpace>) {
    const int max = typename F::Policy(exec, 1, 1).team_size_max(f, Kokkos::ParallelForTag());
    members = max < members ? max : members;
  }
  typename F::Policy policy(exec, tiles_m * tiles_n, members);
  policy.set_scratch_size(0, Kokkos::PerTeam(static_cast<int>(Cfg::scratch_bytes)));
  Kokkos::parallel_for("kformer::gemm_native_team", policy, f);
}

// The team driver with Tiles (GemmGpuTiles or one GemmTeamTiles): Tiles::Large where it gives
// at least Tiles::min_large_teams tiles, Tiles::Small otherwise. Every configuration sums each
// element in the same order, so the choice changes the speed, not the result.
template <class Tiles, class ExecSpace, class TA, class TB>
void gemm_native_team(const ExecSpace& exec, int K, const TA* a, std::int64_t a_sm, std::int64_t a_sk, const TB* b,
                      std::int64_t b_sk, std::int64_t b_sn, const GemmOut& out) {
  using L = typename Tiles::Large;
  const std::int64_t large = std::int64_t((out.M + L::TM - 1) / L::TM) * ((out.N + L::TN - 1) / L::TN);
  if (large >= Tiles::min_large_teams)
    gemm_native_team_cfg<L>(exec, K, a, a_sm, a_sk, b, b_sk, b_sn, out);
  else
    gemm_native_team_cfg<typename Tiles::Small>(exec, K, a, a_sm, a_sk, b, b_sk, b_sn, out);
}

}  // namespace kformer::kernels::detail
