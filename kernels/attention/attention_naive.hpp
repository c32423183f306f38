// Causal grouped-query attention, the naive way: scores (B,H,T,T) materialised, causal softmax
// in place, weighted sum of values. The forward keeps the probabilities for the backward. It is
// the reference point that attention_fused.hpp is measured against, and the simplest to trust.
// Layout of qkv (B,T,(H+2KV)*hd) and out (B,T,H*hd): see attention_common.hpp.
#pragma once

#include "attention_common.hpp"
#include "softmax.hpp"
#include "team_reduce.hpp"

namespace kformer::kernels {

namespace detail {
// dst(b,h,t,t2) = scale * <a(b, t, h*hd ...), c(b, t2, c0 + kv(h)*hd ...)> for t2 <= t, else 0:
// the scores (a = q, c = k) and the gradient of the probabilities (a = dout, c = v).
template <class ExecSpace, class AView, class CView>
void causal_head_dots(const ExecSpace& exec, const char* label, const DView<float****, ExecSpace>& dst,
                      const AView& a, const CView& c, int c0, const QkvLayout& L, float scale) {
  const int H = L.H, hd = L.hd;
  const int64_t BH = int64_t(dst.extent(0)) * H, T = int64_t(dst.extent(2));
  Kokkos::parallel_for(
      label, Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3>>(exec, {0, 0, 0}, {BH, T, T}),
      KOKKOS_LAMBDA(const int64_t bh, const int64_t t, const int64_t t2) {
        const int b = static_cast<int>(bh / H), h = static_cast<int>(bh % H);
        float s = 0.f;
        if (t2 <= t) {
          const auto* x = &a(b, t, h * hd);
          const auto* y = &c(b, t2, c0 + L.kv_of(h) * hd);
          // float() on both sides: bf16 products are exact in fp32 and summed in fp32.
          s = detail::sum_by_lanes(hd, [&](int d) { return float(x[d]) * float(y[d]); });
        }
        dst(b, h, t, t2) = s * scale;
      });
}

// dst(b, t, h*hd + d) = alpha * sum_{j <= t} w(b,h,t,j) * src(b, j, c0 + kv(h)*hd + d): the
// values weighted by the probabilities (src = v) and dq from d(scores) (src = k).
template <class ExecSpace, class DstView, class WView, class SrcView>
void causal_rows_times_heads(const ExecSpace& exec, const char* label, const DstView& dst, const WView& w,
                             const SrcView& src, int c0, const QkvLayout& L, float alpha) {
  using TD = elem_t<DstView>;
  const int H = L.H, hd = L.hd, T = static_cast<int>(w.extent(2));
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      label, Policy(exec, static_cast<int>(w.extent(0)) * T * H, Kokkos::AUTO),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int r = team.league_rank(), h = r % H, t = (r / H) % T, b = r / (H * T);
        const int sc = c0 + L.kv_of(h) * hd;
        team_weighted_rows(
            team, hd, t + 1, [&](int j) { return w(b, h, t, j); }, [&](int j) { return &src(b, j, sc); }, alpha,
            [&](int d, float v) { dst(b, t, h * hd + d) = TD(v); });
      });
}
}  // namespace detail

// out (B,T,H*hd) and att (B,H,T,T) (the probabilities) written from qkv. The scores (fp32) are
// computed in att itself when it is float, else in `scores` (B,H,T,T) and att gets the rounded
// probabilities.
template <class ExecSpace, class OutView, class AttView, class QkvView>
void attention_naive_forward(const ExecSpace& exec, const OutView& out, const AttView& att, const QkvView& qkv,
                             int n_heads, int n_kv_heads, const DView<float****, ExecSpace>& scores = {}) {
  const detail::QkvLayout L = detail::make_qkv_layout(qkv.extent(2), n_heads, n_kv_heads);
  const float scale = 1.f / std::sqrt(static_cast<float>(L.hd));
  if constexpr (std::is_same<elem_t<AttView>, float>::value) {
    detail::causal_head_dots(exec, "kformer::attention_naive_scores", att, qkv, qkv, L.k_col(0), L, scale);
    causal_softmax_forward(exec, att);
  } else {
    if (scores.span() != att.span()) throw std::invalid_argument("attention: bf16 probabilities need fp32 scores scratch");
    detail::causal_head_dots(exec, "kformer::attention_naive_scores", scores, qkv, qkv, L.k_col(0), L, scale);
    causal_softmax_forward(exec, att, DView<const float****, ExecSpace>(scores));
  }
  detail::causal_rows_times_heads(exec, "kformer::attention_naive_values", out, att, qkv, L.v_col(0), L, 1.f);
}

// dqkv (B,T,(H+2KV)*hd) written from dout (B,T,H*hd), the forward's qkv and att (B,H,T,T);
// datt (B,H,T,T) is scratch. dk and dv sum over the query heads of their group in a fixed order.
template <class ExecSpace, class DqkvView, class DoutView, class QkvView, class AttView>
void attention_naive_backward(const ExecSpace& exec, const DqkvView& dqkv, const DView<float****, ExecSpace>& datt,
                              const DoutView& dout, const QkvView& qkv, const AttView& att, int n_heads,
                              int n_kv_heads) {
  using TD = elem_t<DqkvView>;
  const detail::QkvLayout L = detail::make_qkv_layout(qkv.extent(2), n_heads, n_kv_heads);
  const int B = static_cast<int>(qkv.extent(0)), T = static_cast<int>(qkv.extent(1));
  const int KV = L.KV, G = L.H / L.KV, hd = L.hd;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  detail::causal_head_dots(exec, "kformer::attention_naive_datt", datt, dout, qkv, L.v_col(0), L, 1.f);
  causal_softmax_backward(exec, datt, DView<const float****, ExecSpace>(datt), att);  // datt now holds d(scores)
  // dq is written into the q columns of dqkv, which come first: column h*hd as in out.
  detail::causal_rows_times_heads(exec, "kformer::attention_naive_dq", dqkv, datt, qkv, L.k_col(0), L, scale);
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
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
            [&](int d, float v) { dqkv(b, t2, L.k_col(kvh) + d) = TD(v); });
        detail::team_weighted_rows(
            team, hd, G * n, [&](int j) { return att(b, head(j), pos(j), t2); },
            [&](int j) { return &dout(b, pos(j), head(j) * hd); }, 1.f,
            [&](int d, float v) { dqkv(b, t2, L.v_col(kvh) + d) = TD(v); });
      });
}

}  // namespace kformer::kernels
