// Pointwise activations of the MLP block, forward and backward, on rows of tokens (N = B*T):
//   GELU (gpt), tanh approximation: out (N,C) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
//   SwiGLU (llama): inp (N,2F) holds the two projections side by side, [gate | up], and
//   out (N,F) = silu(gate) * up. Under tensor parallelism each rank packs its own F/tp gate
//   columns followed by its own F/tp up columns, so one column-split GEMM feeds it directly.
// Gradients are written (not accumulated).
#pragma once

#include "kokkos_compat.hpp"
#include "view_types.hpp"

namespace kformer::kernels {

namespace detail {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;

KOKKOS_INLINE_FUNCTION float sigmoid(float a) { return 1.f / (1.f + kmath::exp(-a)); }
}  // namespace detail

// out (N,C) = gelu(inp (N,C)).
template <class ExecSpace>
void gelu_forward(const ExecSpace& exec, const DView<float**, ExecSpace>& out,
                  const DView<const float**, ExecSpace>& inp) {
  float* o = out.data();
  const float* x = inp.data();
  Kokkos::parallel_for(
      "kformer::gelu_forward", Kokkos::RangePolicy<ExecSpace>(exec, 0, inp.span()),
      KOKKOS_LAMBDA(const std::size_t i) {
        const float v = x[i];
        const float t = kmath::tanh(detail::kGeluScale * (v + detail::kGeluCubic * v * v * v));
        o[i] = 0.5f * v * (1.f + t);
      });
}

// dinp (N,C) = dout * gelu'(inp).
template <class ExecSpace>
void gelu_backward(const ExecSpace& exec, const DView<float**, ExecSpace>& dinp,
                   const DView<const float**, ExecSpace>& inp, const DView<const float**, ExecSpace>& dout) {
  float* dx = dinp.data();
  const float* x = inp.data();
  const float* dy = dout.data();
  Kokkos::parallel_for(
      "kformer::gelu_backward", Kokkos::RangePolicy<ExecSpace>(exec, 0, inp.span()),
      KOKKOS_LAMBDA(const std::size_t i) {
        const float v = x[i];
        const float t = kmath::tanh(detail::kGeluScale * (v + detail::kGeluCubic * v * v * v));
        const float dt = (1.f - t * t) * detail::kGeluScale * (1.f + 3.f * detail::kGeluCubic * v * v);
        dx[i] = dy[i] * (0.5f * (1.f + t) + 0.5f * v * dt);
      });
}

// out (N,F) = silu(inp[:, :F]) * inp[:, F:], inp (N,2F).
template <class ExecSpace>
void swiglu_forward(const ExecSpace& exec, const DView<float**, ExecSpace>& out,
                    const DView<const float**, ExecSpace>& inp) {
  const int F = static_cast<int>(out.extent(1));
  Kokkos::parallel_for(
      "kformer::swiglu_forward", Kokkos::RangePolicy<ExecSpace>(exec, 0, out.span()),
      KOKKOS_LAMBDA(const std::size_t i) {
        const int r = static_cast<int>(i / F), c = static_cast<int>(i % F);
        const float a = inp(r, c);
        out(r, c) = a * detail::sigmoid(a) * inp(r, F + c);
      });
}

// dinp (N,2F) = [dout * up * silu'(gate) | dout * silu(gate)], from inp (N,2F) and dout (N,F).
template <class ExecSpace>
void swiglu_backward(const ExecSpace& exec, const DView<float**, ExecSpace>& dinp,
                     const DView<const float**, ExecSpace>& inp, const DView<const float**, ExecSpace>& dout) {
  const int F = static_cast<int>(dout.extent(1));
  Kokkos::parallel_for(
      "kformer::swiglu_backward", Kokkos::RangePolicy<ExecSpace>(exec, 0, dout.span()),
      KOKKOS_LAMBDA(const std::size_t i) {
        const int r = static_cast<int>(i / F), c = static_cast<int>(i % F);
        const float a = inp(r, c), u = inp(r, F + c), g = dout(r, c);
        const float s = detail::sigmoid(a);
        dinp(r, c) = g * u * s * (1.f + a * (1.f - s));
        dinp(r, F + c) = g * a * s;
      });
}

}  // namespace kformer::kernels
