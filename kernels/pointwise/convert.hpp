// Element-type conversion between buffers of the same shape (float <-> bf16, or a copy), the
// one place where bf16 mixed precision rounds a GEMM's fp32 output for storage or widens a
// stored bf16 value. Flat over the span: any two row-major views of equal size. Also the plain
// copies and fills the model makes on the device's queue, as kernel calls of their own so that a
// described step lists them (call_record.hpp).
#pragma once

#include "call_record.hpp"

#include <stdexcept>

#include "bf16.hpp"
#include "view_types.hpp"
#include "work_shape.hpp"

namespace kformer::kernels {

// The element type a kernel reads or writes through a view (const dropped).
template <class View>
using elem_t = typename View::non_const_value_type;

// dst = src element by element, rounding to nearest even when dst is bf16 and src float.
// S: the work shape (work_shape.hpp).
template <Shape S = Shape::natural, class ExecSpace, class DstView, class SrcView>
void convert(const ExecSpace& exec, const DstView& dst, const SrcView& src) {
  const Call call("convert", [&] {
    return KernelCall{Family::convert, holds_bf16<DstView> || holds_bf16<SrcView>, false, bytes_of(dst, src)};
  });
  if (call.described()) return;
  using TD = elem_t<DstView>;
  using Ln = detail::lanes_t<S, ExecSpace, elem_t<SrcView>>;
  if (dst.span() != src.span()) throw std::invalid_argument("convert: the buffers differ in size");
  TD* d = dst.data();
  const auto* s = src.data();
  detail::for_lanes<Ln>(exec, "kformer::convert", std::int64_t(src.span()), KOKKOS_LAMBDA(const Ln& l) {
    float v[Ln::count];
    for (int k = 0; k < Ln::count; ++k)
      if (l.has(k)) v[k] = float(s[l.at(k)]);
    for (int k = 0; k < Ln::count; ++k)
      if (l.has(k)) d[l.at(k)] = TD(v[k]);
  });
}

// dst = src, views of one type and shape (Kokkos::deep_copy on the execution space's queue).
template <class ExecSpace, class DstView, class SrcView>
void copy(const ExecSpace& exec, const DstView& dst, const SrcView& src) {
  const Call call("copy", [&] { return KernelCall{Family::copy, holds_bf16<DstView>, false, bytes_of(dst, src)}; });
  if (call.described()) return;
  Kokkos::deep_copy(exec, dst, src);
}

// dst(:, dst_col + c) = src(:, src_col + c) for c < cols, two row-major matrices of the same rows,
// rounded to nearest even where dst is bf16 and src float (as convert): the column blocks a fused
// projection's output packs side by side ([Q | K | V], [gate | up]), kept apart or put back. Its
// bytes are the blocks' own, not the matrices'.
template <class ExecSpace, class DstView, class SrcView>
void copy_columns(const ExecSpace& exec, const DstView& dst, int dst_col, const SrcView& src, int src_col, int cols) {
  using TD = elem_t<DstView>;
  using TS = elem_t<SrcView>;
  const std::int64_t rows = std::int64_t(src.extent(0)), n = cols;
  const Call call("copy_columns", [&] {
    return KernelCall{std::is_same<TD, TS>::value ? Family::copy : Family::convert,
                      holds_bf16<DstView> || holds_bf16<SrcView>, false,
                      double(rows) * double(n) * double(sizeof(TD) + sizeof(TS))};
  });
  if (call.described()) return;
  if (std::int64_t(dst.extent(0)) != rows || dst_col + n > std::int64_t(dst.extent(1)) ||
      src_col + n > std::int64_t(src.extent(1)))
    throw std::invalid_argument("copy_columns: the column blocks do not fit the matrices");
  TD* d = dst.data();
  const TS* s = src.data();
  const std::int64_t dw = dst.extent(1), sw = src.extent(1), d0 = dst_col, s0 = src_col;
  Kokkos::parallel_for(
      "kformer::copy_columns", Kokkos::RangePolicy<ExecSpace>(exec, 0, rows * n), KOKKOS_LAMBDA(const std::int64_t i) {
        const std::int64_t r = i / n, c = i % n;
        d[r * dw + d0 + c] = TD(float(s[r * sw + s0 + c]));
      });
}

// dst = src between the host and the device, waiting for the copy (the blocking
// Kokkos::deep_copy): a step's one readback (its loss and gradient norm), host values staged
// for a reduction (DeviceReduce).
template <class DstView, class SrcView>
void transfer(const DstView& dst, const SrcView& src) {
  const Call call("transfer", [&] { return KernelCall{Family::copy, false, false, bytes_of(src)}; });
  if (call.described()) return;
  Kokkos::deep_copy(dst, src);
}

// Every element of dst = value (Kokkos::deep_copy of a scalar, on the execution space's queue).
template <class ExecSpace, class DstView>
void fill(const ExecSpace& exec, const DstView& dst, typename DstView::const_value_type& value) {
  const Call call("fill", [&] { return KernelCall{Family::copy, holds_bf16<DstView>, false, bytes_of(dst)}; });
  if (call.described()) return;
  Kokkos::deep_copy(exec, dst, value);
}

}  // namespace kformer::kernels
