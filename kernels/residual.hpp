// Residual add, forward and backward: out = a + b over any row-major (N,C) buffers; the
// backward hands the same gradient to both branches. Written as kernels (rather than left to
// the trainer) so the residual stream's traffic is timed and benchmarked like the rest.
#pragma once

#include "view_types.hpp"

namespace kformer::kernels {

// out (N,C) = a (N,C) + b (N,C); out may alias a or b.
template <class ExecSpace>
void residual_forward(const ExecSpace& exec, const DView<float**, ExecSpace>& out,
                      const DView<const float**, ExecSpace>& a, const DView<const float**, ExecSpace>& b) {
  float* o = out.data();
  const float* x = a.data();
  const float* y = b.data();
  Kokkos::parallel_for(
      "kformer::residual_forward", Kokkos::RangePolicy<ExecSpace>(exec, 0, a.span()),
      KOKKOS_LAMBDA(const std::size_t i) { o[i] = x[i] + y[i]; });
}

// da (N,C) = db (N,C) = dout (N,C).
template <class ExecSpace>
void residual_backward(const ExecSpace& exec, const DView<float**, ExecSpace>& da,
                       const DView<float**, ExecSpace>& db, const DView<const float**, ExecSpace>& dout) {
  float* ga = da.data();
  float* gb = db.data();
  const float* g = dout.data();
  Kokkos::parallel_for(
      "kformer::residual_backward", Kokkos::RangePolicy<ExecSpace>(exec, 0, dout.span()),
      KOKKOS_LAMBDA(const std::size_t i) {
        ga[i] = g[i];
        gb[i] = g[i];
      });
}

}  // namespace kformer::kernels
