// AdamW (Loshchilov & Hutter; the update of torch.optim.AdamW): bias-corrected moments and
// decoupled weight decay, on a contiguous range of parameters (a flat RangePolicy: consecutive
// threads update consecutive elements). The gradient norm it is clipped by is sum_of_squares.hpp.
#pragma once

#include "kokkos_compat.hpp"
#include "view_types.hpp"

namespace kformer::kernels {

struct AdamWHyper {
  float lr = 3e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.f;
  int step = 1;            // 1-based, for the bias corrections
  float grad_scale = 1.f;  // applied to g first (the clipping factor)
};

// p, m, v (n) updated in place from g (n):
//   p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
template <class ExecSpace>
void adamw_update(const ExecSpace& exec, const DView<float*, ExecSpace>& p, const DView<const float*, ExecSpace>& g,
                  const DView<float*, ExecSpace>& m, const DView<float*, ExecSpace>& v, const AdamWHyper& h) {
  const double bc1 = 1.0 - kmath::pow(double(h.beta1), double(h.step));
  const double bc2 = 1.0 - kmath::pow(double(h.beta2), double(h.step));
  const float step_size = static_cast<float>(h.lr / bc1), sqrt_bc2 = static_cast<float>(kmath::sqrt(bc2));
  const float decay = 1.f - h.lr * h.weight_decay, b1 = h.beta1, b2 = h.beta2, eps = h.eps, gs = h.grad_scale;
  Kokkos::parallel_for(
      "kformer::adamw_update", Kokkos::RangePolicy<ExecSpace>(exec, 0, p.extent(0)), KOKKOS_LAMBDA(const std::size_t i) {
        const float gi = g(i) * gs;
        const float mi = b1 * m(i) + (1.f - b1) * gi;
        const float vi = b2 * v(i) + (1.f - b2) * gi * gi;
        m(i) = mi;
        v(i) = vi;
        p(i) = p(i) * decay - step_size * mi / (kmath::sqrt(vi) / sqrt_bc2 + eps);
      });
}

}  // namespace kformer::kernels
