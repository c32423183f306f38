// Causal row softmax over a materialised score matrix att (B,H,T,T), in place: row t keeps
// entries [0, t] and zeroes (t, T). The middle step of the naive attention, and a kernel of its
// own so its memory traffic can be benchmarked. Deterministic (fixed-grouping team reductions).
// Scores are fp32, or bf16 (batched_gemm in bf16: its GEMM writes them so); the probabilities
// may be stored in bf16 (computed in fp32, rounded once), in place over bf16 scores.
// A team per row, its threads over the row's contiguous entries (coalesced on a GPU); S is the
// work shape of the row reductions (work_shape.hpp).
#pragma once

#include "attention_common.hpp"
#include "convert.hpp"
#include "fast_exp.hpp"
#include "kokkos_compat.hpp"
#include "team_reduce.hpp"
#include "view_types.hpp"

namespace kformer::kernels {

// probs (B,H,T,T) from scores (B,H,T,T) (float or bf16; read in fp32); probs may be the scores'
// own buffer (in place: each row is read whole before its first write) or another one.
// Entries above the diagonal are written 0.
template <Shape S0 = Shape::natural, class ExecSpace, class ProbView, class ScoreView>
void causal_softmax_forward(const ExecSpace& exec, const ProbView& probs, const ScoreView& scores) {
  using TP = elem_t<ProbView>;
  using TS = elem_t<ScoreView>;
  constexpr Shape S = shape_for<S0, ExecSpace>;
  constexpr bool fp32 = std::is_same<TP, float>::value;
  const int H = static_cast<int>(scores.extent(1)), T = static_cast<int>(scores.extent(2));
  int scratch_level = 0;  // bf16 probabilities: a row of fp32 exponentials in team scratch
  const int rows = static_cast<int>(scores.extent(0)) * H * T;
  const auto policy = detail::scratch_team_policy(exec, rows, fp32 ? 0 : T, scratch_level);
  using Policy = std::remove_const_t<decltype(policy)>;
  Kokkos::parallel_for(
      "kformer::causal_softmax_forward", policy, KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank(), t = r % T, bh = r / T;
        const TS* row = &scores(bh / H, bh % H, t, 0);
        TP* out = &probs(bh / H, bh % H, t, 0);
        const float m = detail::team_row_max<S>(team, t + 1, [&](int j) { return float(row[j]); });
        const int level = scratch_level;  // captured here: nvcc may not first-capture inside if constexpr
        if constexpr (std::is_same<TP, float>::value) {
          // fp32 (in place or not): the exponentials are stored, summed, then scaled.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, T), [&](int j) {
            out[j] = j <= t ? detail::fast_exp(float(row[j]) - m) : 0.f;
          });
          team.team_barrier();
          const float inv = 1.f / detail::team_row_sum<S>(team, t + 1, [&](int j) { return out[j]; });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, t + 1), [&](int j) { out[j] *= inv; });
        } else {
          // bf16: the exponentials kept in fp32 in scratch, summed, then scaled and stored, so that
          // each probability is rounded once, from its fp32 value (in place: the row is read
          // whole before the sum, which every thread waits for, and written after it).
          float* e = detail::ScratchFloats<ExecSpace>(team.team_scratch(level), T).data();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, t + 1),
                               [&](int j) { e[j] = detail::fast_exp(float(row[j]) - m); });
          team.team_barrier();
          const float inv = 1.f / detail::team_row_sum<S>(team, t + 1, [&](int j) { return e[j]; });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, t + 1), [&](int j) { out[j] = TP(e[j] * inv); });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, t + 1, T), [&](int j) { out[j] = TP(0.f); });
        }
      });
}

// att (B,H,T,T): scores in, probabilities out, in place.
template <Shape S0 = Shape::natural, class ExecSpace>
void causal_softmax_forward(const ExecSpace& exec, const DView<float****, ExecSpace>& att) {
  causal_softmax_forward<S0>(exec, att, DView<const float****, ExecSpace>(att));
}

// dscores (B,H,T,T) = att * (datt - sum_j att * datt) per row, zero above the diagonal, in fp32.
// datt is float or bf16 (batched_gemm in bf16); dscores may alias it (each row is read whole
// before its first write) or be bf16 (rounded once, for the batched attention's products). att
// is float or bf16 (what the forward stored).
template <Shape S0 = Shape::natural, class ExecSpace, class DsView, class DpView, class ProbView>
void causal_softmax_backward(const ExecSpace& exec, const DsView& dscores, const DpView& datt, const ProbView& att) {
  using TP = elem_t<ProbView>;
  using TS = elem_t<DsView>;
  using TDP = elem_t<DpView>;
  constexpr Shape S = shape_for<S0, ExecSpace>;
  const int H = static_cast<int>(att.extent(1)), T = static_cast<int>(att.extent(2));
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "kformer::causal_softmax_backward", Policy(exec, static_cast<int>(att.extent(0)) * H * T, Kokkos::AUTO),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank(), t = r % T, bh = r / T, b = bh / H, h = bh % H;
        const TP* p = &att(b, h, t, 0);
        const TDP* dp = &datt(b, h, t, 0);
        TS* ds = &dscores(b, h, t, 0);
        const float pd = detail::team_row_sum<S>(team, t + 1, [&](int j) { return float(p[j]) * float(dp[j]); });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, T), [&](int j) {
          ds[j] = TS(j <= t ? float(p[j]) * (float(dp[j]) - pd) : 0.f);
        });
      });
}

}  // namespace kformer::kernels
