// Causal grouped-query attention, the naive way: scores (B,H,T,T) materialised, causal softmax
// in place, weighted sum of values. The forward keeps the probabilities for the backward. It is
// the reference point that attention_fused.hpp is measured against, and the simplest to trust.
// Layout of qkv (B,T,(H+2KV)*hd) and out (B,T,H*hd): see attention_common.hpp.
#pragma once

#include "attention_common.hpp"
#include "softmax.hpp"

namespace kformer::kernels {

// out (B,T,H*hd) and att (B,H,T,T) (the probabilities) written from qkv.
template <class ExecSpace>
void attention_naive_forward(const ExecSpace& exec, const DView<float***, ExecSpace>& out,
                             const DView<float****, ExecSpace>& att, const DView<const float***, ExecSpace>& qkv,
                             int n_heads, int n_kv_heads) {
  const detail::QkvLayout L = detail::make_qkv_layout(qkv.extent(2), n_heads, n_kv_heads);
  const int B = static_cast<int>(qkv.extent(0)), T = static_cast<int>(qkv.extent(1)), H = L.H, hd = L.hd;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  Kokkos::parallel_for(
      "kformer::attention_naive_scores",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>(exec, {0, 0, 0}, {int64_t(B) * H, int64_t(T), int64_t(T)}),
      KOKKOS_LAMBDA(const int64_t bh, const int64_t t, const int64_t t2) {
        const int b = static_cast<int>(bh / H), h = static_cast<int>(bh % H);
        float s = 0.f;
        if (t2 <= t) {
          const float* q = &qkv(b, t, L.q_col(h));
          const float* k = &qkv(b, t2, L.k_col(L.kv_of(h)));
          for (int d = 0; d < hd; ++d) s += q[d] * k[d];
        }
        att(b, h, t, t2) = s * scale;
      });
  causal_softmax_forward(exec, att);
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "kformer::attention_naive_values", Policy(exec, B * T * H, Kokkos::AUTO),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank(), h = r % H, t = (r / H) % T, b = r / (H * T);
        const int vc = L.v_col(L.kv_of(h));
        detail::team_weighted_rows(
            team, hd, t + 1, [&](int j) { return att(b, h, t, j); }, [&](int j) { return &qkv(b, j, vc); }, 1.f,
            [&](int d, float v) { out(b, t, h * hd + d) = v; });
      });
}

// dqkv (B,T,(H+2KV)*hd) written from dout (B,T,H*hd), the forward's qkv and att (B,H,T,T);
// datt (B,H,T,T) is scratch. dk and dv sum over the query heads of their group in a fixed order.
template <class ExecSpace>
void attention_naive_backward(const ExecSpace& exec, const DView<float***, ExecSpace>& dqkv,
                              const DView<float****, ExecSpace>& datt, const DView<const float***, ExecSpace>& dout,
                              const DView<const float***, ExecSpace>& qkv, const DView<const float****, ExecSpace>& att,
                              int n_heads, int n_kv_heads) {
  const detail::QkvLayout L = detail::make_qkv_layout(qkv.extent(2), n_heads, n_kv_heads);
  const int B = static_cast<int>(qkv.extent(0)), T = static_cast<int>(qkv.extent(1));
  const int H = L.H, KV = L.KV, G = L.H / L.KV, hd = L.hd;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  Kokkos::parallel_for(
      "kformer::attention_naive_datt",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>(exec, {0, 0, 0}, {int64_t(B) * H, int64_t(T), int64_t(T)}),
      KOKKOS_LAMBDA(const int64_t bh, const int64_t t, const int64_t t2) {
        const int b = static_cast<int>(bh / H), h = static_cast<int>(bh % H);
        float s = 0.f;
        if (t2 <= t) {
          const float* g = &dout(b, t, h * hd);
          const float* v = &qkv(b, t2, L.v_col(L.kv_of(h)));
          for (int d = 0; d < hd; ++d) s += g[d] * v[d];
        }
        datt(b, h, t, t2) = s;
      });
  causal_softmax_backward(exec, datt, datt, att);  // datt now holds d(scores)
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "kformer::attention_naive_dq", Policy(exec, B * T * H, Kokkos::AUTO),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank(), h = r % H, t = (r / H) % T, b = r / (H * T);
        const int kc = L.k_col(L.kv_of(h));
        detail::team_weighted_rows(
            team, hd, t + 1, [&](int j) { return datt(b, h, t, j); }, [&](int j) { return &qkv(b, j, kc); }, scale,
            [&](int d, float v) { dqkv(b, t, L.q_col(h) + d) = v; });
      });
  // dk, dv of kv head `kvh` at key position t2: over the G query heads of the group and the
  // query positions t >= t2, flattened as j = g * (T - t2) + (t - t2).
  Kokkos::parallel_for(
      "kformer::attention_naive_dkv", Policy(exec, B * T * KV, Kokkos::AUTO),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank(), kvh = r % KV, t2 = (r / KV) % T, b = r / (KV * T);
        const int n = T - t2;
        auto head = [&](int j) { return kvh * G + j / n; };
        auto pos = [&](int j) { return t2 + j % n; };
        detail::team_weighted_rows(
            team, hd, G * n, [&](int j) { return datt(b, head(j), pos(j), t2); },
            [&](int j) { return &qkv(b, pos(j), L.q_col(head(j))); }, scale,
            [&](int d, float v) { dqkv(b, t2, L.k_col(kvh) + d) = v; });
        detail::team_weighted_rows(
            team, hd, G * n, [&](int j) { return att(b, head(j), pos(j), t2); },
            [&](int j) { return &dout(b, pos(j), head(j) * hd); }, 1.f,
            [&](int d, float v) { dqkv(b, t2, L.v_col(kvh) + d) = v; });
      });
}

}  // namespace kformer::kernels
