// RMSNorm (llama): forward and backward over rows of tokens, x (N,C) with N = B*T.
// out = x / sqrt(mean(x^2) + eps) * weight (no centring, no bias); the forward saves rstd (N).
// dx is written; dweight accumulates (+=) over micro-batches; both are bitwise deterministic.
#pragma once

#include "call_record.hpp"

#include "normalization.hpp"

namespace kformer::kernels {

// out (N,C), rstd (N) written; x (N,C), weight (C) read (x and out float or bf16).
template <Shape S = Shape::natural, class ExecSpace, class OutView, class XView>
void rmsnorm_forward(const ExecSpace& exec, const OutView& out,
                     const DView<float*, ExecSpace>& rstd, const XView& x,
                     const DView<const float*, ExecSpace>& weight, float eps = 1e-5f) {
  const Call call("rmsnorm_forward", [&] {
    KernelCall c{Family::norm, holds_bf16<OutView>, false, bytes_of(out, rstd, x, weight)};
    c.shape = {std::int64_t(x.extent(0)), std::int64_t(x.extent(1)), 0, 0, 0, 0};  // rows, channels
    return c;
  });
  if (call.described()) return;
  detail::norm_forward<S>(exec, out, DView<float*, ExecSpace>(), rstd, x, weight,
                       DView<const float*, ExecSpace>(), eps, false);
}

// dx (N,C) written, dweight (C) added to, from dout (N,C) and the forward's x, weight, rstd.
template <Shape S = Shape::natural, class ExecSpace, class DxView, class DyView, class XView>
void rmsnorm_backward(const ExecSpace& exec, const DxView& dx,
                      const DView<float*, ExecSpace>& dweight, const DyView& dout,
                      const XView& x, const DView<const float*, ExecSpace>& weight,
                      const DView<const float*, ExecSpace>& rstd) {
  const Call call("rmsnorm_backward", [&] {
    KernelCall c{Family::norm, holds_bf16<XView>, true, bytes_of(dx, dweight, dout, x, weight, rstd)};
    c.shape = {std::int64_t(x.extent(0)), std::int64_t(x.extent(1)), 0, 0, 0, 0};  // rows, channels
    c.kept[0] = {"kformer::norm_dparams", detail::norm_partials_bytes(x.extent(0), x.extent(1))};
    return c;
  });
  if (call.described()) return;
  detail::norm_backward<S>(exec, dx, dweight, DView<float*, ExecSpace>(), dout, x, weight,
                        DView<const float*, ExecSpace>(), rstd, false);
}

}  // namespace kformer::kernels
