// LayerNorm (gpt): forward and backward over rows of tokens, x (N,C) with N = B*T.
// out = (x - mean) / sqrt(var + eps) * weight + bias; the forward saves mean (N) and rstd (N)
// for the backward. dx is written; dweight and dbias accumulate (+=) over micro-batches; all are
// bitwise deterministic.
#pragma once

#include "call_record.hpp"

#include "normalization.hpp"

namespace kformer::kernels {

// out (N,C), mean (N), rstd (N) written; x (N,C), weight (C), bias (C) read (x and out float or bf16).
template <Shape S = Shape::natural, class ExecSpace, class OutView, class XView>
void layernorm_forward(const ExecSpace& exec, const OutView& out,
                       const DView<float*, ExecSpace>& mean, const DView<float*, ExecSpace>& rstd,
                       const XView& x, const DView<const float*, ExecSpace>& weight,
                       const DView<const float*, ExecSpace>& bias, float eps = 1e-5f) {
  const Call call("layernorm_forward", [&] {
    KernelCall c{Family::norm, holds_bf16<OutView>, false, bytes_of(out, mean, rstd, x, weight, bias)};
    c.shape = {std::int64_t(x.extent(0)), std::int64_t(x.extent(1)), 0, 0, 0, 0};  // rows, channels
    return c;
  });
  if (call.described()) return;
  detail::norm_forward<S>(exec, out, mean, rstd, x, weight, bias, eps, true);
}

// dx (N,C) written, dweight (C) and dbias (C) added to, from dout (N,C) and the forward's x, weight, mean, rstd.
template <Shape S = Shape::natural, class ExecSpace, class DxView, class DyView, class XView>
void layernorm_backward(const ExecSpace& exec, const DxView& dx,
                        const DView<float*, ExecSpace>& dweight, const DView<float*, ExecSpace>& dbias,
                        const DyView& dout, const XView& x,
                        const DView<const float*, ExecSpace>& weight, const DView<const float*, ExecSpace>& mean,
                        const DView<const float*, ExecSpace>& rstd) {
  const Call call("layernorm_backward", [&] {
    KernelCall c{Family::norm, holds_bf16<XView>, true, bytes_of(dx, dweight, dbias, dout, x, weight, mean, rstd)};
    c.shape = {std::int64_t(x.extent(0)), std::int64_t(x.extent(1)), 0, 0, 0, 0};  // rows, channels
    c.kept[0] = {"kformer::norm_dparams", detail::norm_partials_bytes(x.extent(0), x.extent(1))};
    return c;
  });
  if (call.described()) return;
  detail::norm_backward<S>(exec, dx, dweight, dbias, dout, x, weight, mean, rstd, true);
}

}  // namespace kformer::kernels
