// Residual add, forward and backward: out = a + b over any row-major (N,C) buffers; the
// backward hands the same gradient to both branches. Written as kernels (rather than left to
// the trainer) so the residual stream's traffic is timed and benchmarked like the rest. Each
// view may be float or bf16; the sum is fp32, rounded once when out is bf16.
#pragma once

#include "call_record.hpp"

#include "convert.hpp"
#include "work_shape.hpp"

namespace kformer::kernels {

// out (N,C) = a (N,C) + b (N,C); out may alias a or b. S: the work shape (work_shape.hpp).
// gradient: the add sums two branches' gradients in a backward (recorded as a backward call, which
// predict.residual costs as other software's gradient sum, not its forward residual add).
template <Shape S = Shape::natural, class ExecSpace, class OutView, class AView, class BView>
void residual_forward(const ExecSpace& exec, const OutView& out, const AView& a, const BView& b, bool gradient = false) {
  const Call call("residual_forward", [&] {
    KernelCall c{Family::residual, holds_bf16<AView>, gradient, bytes_of(out, a, b)};
    c.shape = {std::int64_t(a.extent(0)), std::int64_t(a.extent(1)), 0, 0, 0, 0};  // rows, channels
    return c;
  });
  if (call.described()) return;
  using TO = elem_t<OutView>;
  using Ln = detail::lanes_t<S, ExecSpace, elem_t<AView>>;
  TO* o = out.data();
  const auto* x = a.data();
  const auto* y = b.data();
  detail::for_lanes<Ln>(exec, "kformer::residual_forward", std::int64_t(a.span()), KOKKOS_LAMBDA(const Ln& l) {
    float s[Ln::count];
    for (int k = 0; k < Ln::count; ++k)
      if (l.has(k)) s[k] = float(x[l.at(k)]) + float(y[l.at(k)]);
    for (int k = 0; k < Ln::count; ++k)
      if (l.has(k)) o[l.at(k)] = TO(s[k]);
  });
}

// da (N,C) = db (N,C) = dout (N,C).
template <Shape S = Shape::natural, class ExecSpace, class DaView, class DbView, class DoutView>
void residual_backward(const ExecSpace& exec, const DaView& da, const DbView& db, const DoutView& dout) {
  using TA = elem_t<DaView>;
  using TB = elem_t<DbView>;
  using Ln = detail::lanes_t<S, ExecSpace, elem_t<DoutView>>;
  TA* ga = da.data();
  TB* gb = db.data();
  const auto* g = dout.data();
  detail::for_lanes<Ln>(exec, "kformer::residual_backward", std::int64_t(dout.span()), KOKKOS_LAMBDA(const Ln& l) {
    float v[Ln::count];
    for (int k = 0; k < Ln::count; ++k)
      if (l.has(k)) v[k] = float(g[l.at(k)]);
    for (int k = 0; k < Ln::count; ++k)
      if (l.has(k)) {
        ga[l.at(k)] = TA(v[k]);
        gb[l.at(k)] = TB(v[k]);
      }
  });
}

}  // namespace kformer::kernels
