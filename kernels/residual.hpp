// Residual add, forward and backward: out = a + b over any row-major (N,C) buffers; the
// backward hands the same gradient to both branches. Written as kernels (rather than left to
// the trainer) so the residual stream's traffic is timed and benchmarked like the rest. Each
// view may be float or bf16; the sum is fp32, rounded once when out is bf16.
#pragma once

#include "call_record.hpp"

#include "convert.hpp"

namespace kformer::kernels {

// out (N,C) = a (N,C) + b (N,C); out may alias a or b.
template <class ExecSpace, class OutView, class AView, class BView>
void residual_forward(const ExecSpace& exec, const OutView& out, const AView& a, const BView& b) {
  const Call call("residual_forward", [&] {
    return KernelCall{Family::residual, holds_bf16<AView>, false, bytes_of(out, a, b)};
  });
  if (call.described()) return;
  using TO = elem_t<OutView>;
  TO* o = out.data();
  const auto* x = a.data();
  const auto* y = b.data();
  Kokkos::parallel_for(
      "kformer::residual_forward", Kokkos::RangePolicy<ExecSpace>(exec, 0, a.span()),
      KOKKOS_LAMBDA(const std::size_t i) { o[i] = TO(float(x[i]) + float(y[i])); });
}

// da (N,C) = db (N,C) = dout (N,C).
template <class ExecSpace, class DaView, class DbView, class DoutView>
void residual_backward(const ExecSpace& exec, const DaView& da, const DbView& db, const DoutView& dout) {
  using TA = elem_t<DaView>;
  using TB = elem_t<DbView>;
  TA* ga = da.data();
  TB* gb = db.data();
  const auto* g = dout.data();
  Kokkos::parallel_for(
      "kformer::residual_backward", Kokkos::RangePolicy<ExecSpace>(exec, 0, dout.span()),
      KOKKOS_LAMBDA(const std::size_t i) {
        ga[i] = TA(float(g[i]));
        gb[i] = TB(float(g[i]));
      });
}

}  // namespace kformer::kernels
