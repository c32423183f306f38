// How a memory-bound kernel lays out its work over a row-major (rows, cols) range, in one of two
// shapes. Host: a work item walks a run of contiguous columns, which the compiler vectorises.
// GPU: consecutive threads take consecutive columns, so a warp's loads coalesce into whole
// cache lines. Each execution space gets its natural shape; the kernel tests also run the GPU
// shape on the host, against the same float64 references.
#pragma once

#include <cstdint>

#include "view_types.hpp"

namespace kformer::kernels {

// `natural`: the execution space's own (host on Serial/OpenMP/Threads, gpu elsewhere). Kernels take
// it as their first template argument, defaulted, so callers name it only to force a shape.
enum class Shape { natural, host, gpu };

template <Shape S, class ExecSpace>
inline constexpr Shape shape_for = S != Shape::natural ? S : runs_on_host<ExecSpace> ? Shape::host : Shape::gpu;

namespace detail {

// Calls f(r, c) for every row r < N and column c < Fw, as a flat RangePolicy over the contiguous
// index (no MDRangePolicy, whose thread mapping differs between backends and Kokkos versions).
// Work items are (row, chunk of W columns): W = 64 in the host shape, 1 in the GPU shape.
template <Shape S, class ExecSpace, class F>
void for_rows_columns(const ExecSpace& exec, const char* label, std::int64_t N, std::int64_t Fw, const F& f) {
  constexpr std::int64_t W = shape_for<S, ExecSpace> == Shape::host ? 64 : 1;
  const std::int64_t nchunk = (Fw + W - 1) / W;
  if (N == 0 || Fw == 0) return;
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(exec, 0, N * nchunk), KOKKOS_LAMBDA(const std::int64_t k) {
        const std::int64_t r = k / nchunk, c0 = (k % nchunk) * W;
        const std::int64_t c1 = c0 + W < Fw ? c0 + W : Fw;
        for (std::int64_t c = c0; c < c1; ++c) f(r, c);
      });
}

// Flat element-wise work over n elements, as lanes: each work item takes `lanes` elements, at
// first, first + stride, ... (stride = n / lanes rounded up), so each lane's accesses coalesce
// across a warp while a thread's lanes are independent of each other. A kernel body loads all its
// lanes, then computes and stores them: several loads in flight per thread, which a streaming
// kernel needs to approach the bandwidth of an H100 (one 4-byte load per thread left the residual
// add and GELU at 0.2-0.4 of the copy in fp32, and at the same elements per second, so half the
// bytes per second, in bf16: docs/PERFORMANCE.md, session 12). The host shape has one lane, the
// loop over contiguous elements that the compiler vectorises.
template <int L>
struct Lanes {
  static constexpr int count = L;
  std::int64_t first, stride, n;
  KOKKOS_INLINE_FUNCTION bool has(int k) const { return L == 1 || first + k * stride < n; }
  KOKKOS_INLINE_FUNCTION std::int64_t at(int k) const { return first + k * stride; }
};

// Lanes per work item for elements of T: one in the host shape; 16 bytes of them (at least 4) in
// the GPU shape.
template <Shape S, class ExecSpace, class T>
using lanes_t = Lanes<shape_for<S, ExecSpace> == Shape::host ? 1 : (sizeof(T) >= 4 ? 4 : int(16 / sizeof(T)))>;

// Calls f(Lanes) over n elements, as above; Ln is lanes_t<...> for the kernel's main element type.
template <class Ln, class ExecSpace, class F>
void for_lanes(const ExecSpace& exec, const char* label, std::int64_t n, const F& f) {
  if (n == 0) return;
  const std::int64_t m = (n + Ln::count - 1) / Ln::count;
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(exec, 0, m),
                       KOKKOS_LAMBDA(const std::int64_t i) { f(Ln{i, m, n}); });
}

}  // namespace detail
}  // namespace kformer::kernels
