// Pointwise activations of the MLP block, forward and backward, on rows of tokens (N = B*T):
//   GELU (gpt), tanh approximation: out (N,C) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
//   SwiGLU (llama): inp (N,2F) holds the two projections side by side, [gate | up], and
//   out (N,F) = silu(gate) * up. Under tensor parallelism each rank packs its own F/tp gate
//   columns followed by its own F/tp up columns, so one column-split GEMM feeds it directly.
// Gradients are written (not accumulated). Element types are the views' own (float or bf16, each
// view independently); the arithmetic is fp32.
#pragma once

#include "call_record.hpp"

#include "convert.hpp"
#include "fast_exp.hpp"
#include "kokkos_compat.hpp"
#include "view_types.hpp"
#include "work_shape.hpp"

namespace kformer::kernels {

namespace detail {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;

KOKKOS_INLINE_FUNCTION float sigmoid(float a) { return 1.f / (1.f + fast_exp(-a)); }

// tanh(u) = 1 - 2 / (exp(2u) + 1): one exp, several times cheaper than tanh in glibc; the
// absolute error (~1e-7) is what GELU's 0.5 x (1 + tanh) needs. Saturates cleanly at +-1.
KOKKOS_INLINE_FUNCTION float tanh_via_exp(float u) { return 1.f - 2.f / (fast_exp(2.f * u) + 1.f); }

KOKKOS_INLINE_FUNCTION float gelu_tanh_arg(float v) { return kGeluScale * (v + kGeluCubic * v * v * v); }

// gelu(v) in fp32: what gelu_forward and the GEMM's GELU epilogue (gemm.hpp) store, before
// rounding to the output's type. One function, so that the two give the same bits.
KOKKOS_INLINE_FUNCTION float gelu_value(float v) {
  const float t = tanh_via_exp(gelu_tanh_arg(v));
  return 0.5f * v * (1.f + t);
}
}  // namespace detail

// out (N,C) = gelu(inp (N,C)). S: the work shape (work_shape.hpp).
template <Shape S = Shape::natural, class ExecSpace, class OutView, class InView>
void gelu_forward(const ExecSpace& exec, const OutView& out, const InView& inp) {
  const Call call("gelu_forward", [&] {
    return KernelCall{Family::activation, holds_bf16<InView>, false, bytes_of(out, inp)};
  });
  if (call.described()) return;
  using TO = elem_t<OutView>;
  using Ln = detail::lanes_t<S, ExecSpace, elem_t<InView>>;
  TO* o = out.data();
  const auto* x = inp.data();
  detail::for_lanes<Ln>(exec, "kformer::gelu_forward", std::int64_t(inp.span()), KOKKOS_LAMBDA(const Ln& l) {
    float v[Ln::count];
    for (int k = 0; k < Ln::count; ++k)
      if (l.has(k)) v[k] = float(x[l.at(k)]);
    for (int k = 0; k < Ln::count; ++k)
      if (l.has(k)) o[l.at(k)] = TO(detail::gelu_value(v[k]));
  });
}

// dinp (N,C) = dout * gelu'(inp).
template <Shape S = Shape::natural, class ExecSpace, class DinpView, class InView, class DoutView>
void gelu_backward(const ExecSpace& exec, const DinpView& dinp, const InView& inp, const DoutView& dout) {
  const Call call("gelu_backward", [&] {
    return KernelCall{Family::activation, holds_bf16<InView>, true, bytes_of(dinp, inp, dout)};
  });
  if (call.described()) return;
  using TD = elem_t<DinpView>;
  using Ln = detail::lanes_t<S, ExecSpace, elem_t<InView>>;
  TD* dx = dinp.data();
  const auto* x = inp.data();
  const auto* dy = dout.data();
  detail::for_lanes<Ln>(exec, "kformer::gelu_backward", std::int64_t(inp.span()), KOKKOS_LAMBDA(const Ln& l) {
    float v[Ln::count], g[Ln::count];
    for (int k = 0; k < Ln::count; ++k)
      if (l.has(k)) v[k] = float(x[l.at(k)]), g[k] = float(dy[l.at(k)]);
    for (int k = 0; k < Ln::count; ++k)
      if (l.has(k)) {
        const float t = detail::tanh_via_exp(detail::gelu_tanh_arg(v[k]));
        const float dt = (1.f - t * t) * detail::kGeluScale * (1.f + 3.f * detail::kGeluCubic * v[k] * v[k]);
        dx[l.at(k)] = TD(g[k] * (0.5f * (1.f + t) + 0.5f * v[k] * dt));
      }
  });
}

// out (N,F) = silu(inp[:, :F]) * inp[:, F:], inp (N,2F). S: the work shape (work_shape.hpp): on
// the host a run of contiguous columns per work item; on a GPU lanes over out's N*F elements, a
// thread loading all its lanes' gate and up values before it computes (one 4-byte load per
// thread in flight was what left the streaming kernels at 0.2-0.4 of the copy on an H100).
template <Shape S = Shape::natural, class ExecSpace, class OutView, class InView>
void swiglu_forward(const ExecSpace& exec, const OutView& out, const InView& inp) {
  const Call call("swiglu_forward", [&] {
    KernelCall c{Family::activation, holds_bf16<InView>, false, bytes_of(out, inp)};
    c.shape = {std::int64_t(out.extent(0)), std::int64_t(out.extent(1)), 0, 0, 0, 0};  // rows, F
    return c;
  });
  if (call.described()) return;
  using TO = elem_t<OutView>;
  const int F = static_cast<int>(out.extent(1));
  if constexpr (shape_for<S, ExecSpace> == Shape::host) {
    detail::for_rows_columns<S>(exec, "kformer::swiglu_forward", static_cast<int>(out.extent(0)), F,
                                KOKKOS_LAMBDA(const std::int64_t r, const std::int64_t c) {
                                  const float a = inp(r, c);
                                  out(r, c) = TO(a * detail::sigmoid(a) * float(inp(r, F + c)));
                                });
  } else {
    using Ln = detail::lanes_t<S, ExecSpace, elem_t<InView>>;
    detail::for_lanes<Ln>(exec, "kformer::swiglu_forward", std::int64_t(out.extent(0)) * F,
                          KOKKOS_LAMBDA(const Ln& l) {
                            float a[Ln::count], u[Ln::count];
                            for (int k = 0; k < Ln::count; ++k)
                              if (l.has(k)) {
                                const std::int64_t r = l.at(k) / F, c = l.at(k) % F;
                                a[k] = float(inp(r, c)), u[k] = float(inp(r, F + c));
                              }
                            for (int k = 0; k < Ln::count; ++k)
                              if (l.has(k)) out(l.at(k) / F, l.at(k) % F) = TO(a[k] * detail::sigmoid(a[k]) * u[k]);
                          });
  }
}

namespace detail {
// SwiGLU's gradients at one element: gate a, up u, output gradient g.
KOKKOS_INLINE_FUNCTION void swiglu_grads(float a, float u, float g, float& d_gate, float& d_up) {
  const float s = sigmoid(a);
  d_gate = g * u * s * (1.f + a * (1.f - s));
  d_up = g * a * s;
}
}  // namespace detail

// dinp (N,2F) = [dout * up * silu'(gate) | dout * silu(gate)], from inp (N,2F) and dout (N,F).
// Work shapes as swiglu_forward's.
template <Shape S = Shape::natural, class ExecSpace, class DinpView, class InView, class DoutView>
void swiglu_backward(const ExecSpace& exec, const DinpView& dinp, const InView& inp, const DoutView& dout) {
  const Call call("swiglu_backward", [&] {
    KernelCall c{Family::activation, holds_bf16<InView>, true, bytes_of(dinp, inp, dout)};
    c.shape = {std::int64_t(dout.extent(0)), std::int64_t(dout.extent(1)), 0, 0, 0, 0};  // rows, F
    return c;
  });
  if (call.described()) return;
  using TD = elem_t<DinpView>;
  const int F = static_cast<int>(dout.extent(1));
  if constexpr (shape_for<S, ExecSpace> == Shape::host) {
    detail::for_rows_columns<S>(exec, "kformer::swiglu_backward", static_cast<int>(dout.extent(0)), F,
                                KOKKOS_LAMBDA(const std::int64_t r, const std::int64_t c) {
                                  float dg, du;
                                  detail::swiglu_grads(inp(r, c), inp(r, F + c), dout(r, c), dg, du);
                                  dinp(r, c) = TD(dg);
                                  dinp(r, F + c) = TD(du);
                                });
  } else {
    using Ln = detail::lanes_t<S, ExecSpace, elem_t<InView>>;
    detail::for_lanes<Ln>(exec, "kformer::swiglu_backward", std::int64_t(dout.extent(0)) * F,
                          KOKKOS_LAMBDA(const Ln& l) {
                            float a[Ln::count], u[Ln::count], g[Ln::count];
                            for (int k = 0; k < Ln::count; ++k)
                              if (l.has(k)) {
                                const std::int64_t r = l.at(k) / F, c = l.at(k) % F;
                                a[k] = float(inp(r, c)), u[k] = float(inp(r, F + c)), g[k] = float(dout(r, c));
                              }
                            for (int k = 0; k < Ln::count; ++k)
                              if (l.has(k)) {
                                const std::int64_t r = l.at(k) / F, c = l.at(k) % F;
                                float dg, du;
                                detail::swiglu_grads(a[k], u[k], g[k], dg, du);
                                dinp(r, c) = TD(dg);
                                dinp(r, F + c) = TD(du);
                              }
                          });
  }
}

}  // namespace kformer::kernels
