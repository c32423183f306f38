// The sum of squares of many ranges of one flat buffer (every gradient tensor a rank counts
// towards the global gradient norm) as one fused reduction on the device, in double, written to a
// device scalar: no per-tensor reduction and no value on the host until the caller reads it.
//
// Deterministic, also across thread counts: the ranges are cut into fixed blocks of kBlock
// elements; each block's sum has a fixed grouping (host shape: 8 lanes over i mod 8; GPU shape:
// the team's threads over consecutive elements, then the team reduce's fixed tree), and the
// blocks' partial sums are added in block order by one thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "call_record.hpp"
#include "view_types.hpp"
#include "work_shape.hpp"

namespace kformer::kernels {

template <class ExecSpace>
class SumOfSquares {
 public:
  static constexpr std::int64_t kBlock = 1 << 14;
  using Mem = typename ExecSpace::memory_space;

  // ranges: (offset, length) into the buffer run() will read; the tables are built once here.
  explicit SumOfSquares(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges) {
    std::size_t n = 0;  // blocks
    for (const auto& r : ranges) elements_ += r.second, n += std::size_t((r.second + kBlock - 1) / kBlock);
    // Described (call_record.hpp): the tables' sizes, nothing made (run() describes its call).
    const bool described = describe_setup_buffer("kformer::grad_norm_blocks", 16.0 * double(n));
    if (describe_setup_buffer("kformer::grad_norm_partials", 8.0 * double(n)) || described) return;
    std::vector<std::int64_t> starts, lengths;
    for (const auto& [offset, length] : ranges)
      for (std::int64_t b = 0; b < length; b += kBlock) {
        starts.push_back(offset + b);
        lengths.push_back(length - b < kBlock ? length - b : kBlock);
      }
    blocks_ = Kokkos::View<std::int64_t* [2], Kokkos::LayoutRight, Mem>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "kformer::grad_norm_blocks"), n);
    partials_ = Kokkos::View<double*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kformer::grad_norm_partials"), n);
    auto h = Kokkos::create_mirror_view(blocks_);
    for (std::size_t i = 0; i < n; ++i) h(i, 0) = starts[i], h(i, 1) = lengths[i];
    Kokkos::deep_copy(blocks_, h);
  }

  // out() = sum over the ranges of double(x[i])^2; S: the work shape (work_shape.hpp).
  // out: a rank-0 View of double in Mem.
  // T: float, or bf16 (a bf16 gradient buffer), each element widened before it is squared.
  template <Shape S0 = Shape::natural, class T, class OutView>
  void run(const ExecSpace& exec, const T* x, const OutView& out) const {
    const Call call("sum_of_squares", [&] {
      return KernelCall{Family::reduction, sizeof(T) == 2, false, double(elements_) * double(sizeof(T)), 0, {elements_}};
    });
    if (call.described()) return;
    const auto blocks = blocks_;
    const auto partials = partials_;
    const int n = static_cast<int>(blocks.extent(0));
    using Policy = Kokkos::TeamPolicy<ExecSpace>;
    Kokkos::parallel_for(
        "kformer::grad_norm_blocks", Policy(exec, n, Kokkos::AUTO),
        KOKKOS_LAMBDA(const typename Policy::member_type& team) {
          const int k = team.league_rank();
          const T* p = x + blocks(k, 0);
          const int len = static_cast<int>(blocks(k, 1));
          double s = 0;
          if constexpr (shape_for<S0, ExecSpace> == Shape::gpu) {  // (nvcc: no local constexpr in a lambda's if constexpr)
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(team, len), [&](const int i, double& acc) { acc += double(float(p[i])) * double(float(p[i])); },
                s);
          } else {
            constexpr int L = 8;
            double lanes[L] = {};
            const int nb = len / L;
            for (int b = 0; b < nb; ++b)
              for (int l = 0; l < L; ++l) lanes[l] += double(float(p[b * L + l])) * double(float(p[b * L + l]));
            for (int l = 0; nb * L + l < len; ++l) lanes[l] += double(float(p[nb * L + l])) * double(float(p[nb * L + l]));
            for (int w = L / 2; w > 0; w /= 2)
              for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
            s = lanes[0];
          }
          Kokkos::single(Kokkos::PerTeam(team), [&]() { partials(k) = s; });
        });
    Kokkos::parallel_for(
        "kformer::grad_norm_total", Kokkos::RangePolicy<ExecSpace>(exec, 0, 1), KOKKOS_LAMBDA(const int) {
          double total = 0;
          for (int k = 0; k < n; ++k) total += partials(k);
          out() = total;
        });
  }

 private:
  Kokkos::View<std::int64_t* [2], Kokkos::LayoutRight, Mem> blocks_;  // (start, length) of each block
  Kokkos::View<double*, Mem> partials_;                               // each block's sum
  std::int64_t elements_ = 0;                                         // over all ranges
};

}  // namespace kformer::kernels
