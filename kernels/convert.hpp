// Element-type conversion between buffers of the same shape (float <-> bf16, or a copy), the
// one place where bf16 mixed precision rounds a GEMM's fp32 output for storage or widens a
// stored bf16 value. Flat over the span: any two row-major views of equal size.
#pragma once

#include <stdexcept>

#include "bf16.hpp"
#include "view_types.hpp"

namespace kformer::kernels {

// The element type a kernel reads or writes through a view (const dropped).
template <class View>
using elem_t = typename View::non_const_value_type;

// dst = src element by element, rounding to nearest even when dst is bf16 and src float.
template <class ExecSpace, class DstView, class SrcView>
void convert(const ExecSpace& exec, const DstView& dst, const SrcView& src) {
  using TD = elem_t<DstView>;
  if (dst.span() != src.span()) throw std::invalid_argument("convert: the buffers differ in size");
  TD* d = dst.data();
  const auto* s = src.data();
  Kokkos::parallel_for(
      "kformer::convert", Kokkos::RangePolicy<ExecSpace>(exec, 0, src.span()),
      KOKKOS_LAMBDA(const std::size_t i) { d[i] = TD(float(s[i])); });
}

}  // namespace kformer::kernels
