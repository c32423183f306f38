// AdamW over every tensor segment a rank updates, in one launch: the multi-tensor update
// (torch.optim.AdamW's foreach and fused paths do the same on a GPU). One launch per segment cost
// a GPT-2 124M step about 150 kernel launches, most of them over a bias or a norm's few hundred
// elements, where a launch takes longer than its work.
//
// The segments are (offset, length) runs of three flat buffers: the values, the gradient and the
// two moments, each at its own offset, with or without weight decay. They are cut into fixed
// blocks of kBlock elements (tables built once); each block is a team's work: in the host shape
// one thread's vectorised loop, in the GPU shape the team's threads over consecutive elements.
// Each element is updated exactly as adamw_update updates it (detail::AdamWStep): the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "adamw.hpp"
#include "call_record.hpp"
#include "view_types.hpp"
#include "work_shape.hpp"

namespace kformer::kernels {

template <class ExecSpace>
class AdamWSegments {
 public:
  static constexpr std::int64_t kBlock = 1 << 12;
  using Mem = typename ExecSpace::memory_space;
  struct Segment {
    std::int64_t value_offset, grad_offset, state_offset, length;
    bool decay;  // weight decay applies
  };

  explicit AdamWSegments(const std::vector<Segment>& segments) {
    std::size_t n = 0;  // blocks
    for (const Segment& s : segments) elements_ += s.length, n += std::size_t((s.length + kBlock - 1) / kBlock);
    // Described (call_record.hpp): the table's size, nothing made (run() describes its call).
    if (describe_setup_buffer("kformer::adamw_blocks", 40.0 * double(n))) return;
    blocks_ = Kokkos::View<std::int64_t* [5], Kokkos::LayoutRight, Mem>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "kformer::adamw_blocks"), n);
    auto h = Kokkos::create_mirror_view(blocks_);
    std::size_t k = 0;
    for (const Segment& s : segments)
      for (std::int64_t b = 0; b < s.length; b += kBlock, ++k) {
        h(k, 0) = s.value_offset + b, h(k, 1) = s.grad_offset + b, h(k, 2) = s.state_offset + b;
        h(k, 3) = s.length - b < kBlock ? s.length - b : kBlock;
        h(k, 4) = s.decay ? 1 : 0;
      }
    Kokkos::deep_copy(blocks_, h);
  }

  // One AdamW step of every segment: values, m, v updated in place from grads (G: float or bf16).
  // h.weight_decay is the decay of the segments that decay; the others take none.
  template <Shape S0 = Shape::natural, class G>
  void run(const ExecSpace& exec, float* values, const G* grads, float* m, float* v, const AdamWHyper& h) const {
    // Bytes: values and both moments read and written, the gradient read (as adamw_update).
    const Call call("adamw_update", [&] {
      return KernelCall{Family::optimizer, false, false, double(elements_) * (24.0 + double(sizeof(G)))};
    });
    if (call.described()) return;
    const detail::AdamWStep c(h);
    const auto blocks = blocks_;
    using Policy = Kokkos::TeamPolicy<ExecSpace>;
    const int n = static_cast<int>(blocks.extent(0));
    // A team of one thread on the host: the host shape's loop is the whole team's.
    const Policy policy = [&] {
      if constexpr (runs_on_host<ExecSpace>) return Policy(exec, n, 1);
      else return Policy(exec, n, Kokkos::AUTO);
    }();
    Kokkos::parallel_for(
        "kformer::adamw_update", policy,
        KOKKOS_LAMBDA(const typename Policy::member_type& team) {
          const int k = team.league_rank();
          float* KOKKOS_RESTRICT p = values + blocks(k, 0);
          const G* KOKKOS_RESTRICT g = grads + blocks(k, 1);
          float* KOKKOS_RESTRICT mk = m + blocks(k, 2);
          float* KOKKOS_RESTRICT vk = v + blocks(k, 2);
          const int len = static_cast<int>(blocks(k, 3));
          const float decay = blocks(k, 4) != 0 ? c.decay : 1.f;
          if constexpr (shape_for<S0, ExecSpace> == Shape::gpu) {  // (nvcc: no local constexpr in a lambda's if constexpr)
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, len), [&](const int i) { c.update(p[i], g[i], mk[i], vk[i], decay); });
          } else {
            for (int i = 0; i < len; ++i) c.update(p[i], g[i], mk[i], vk[i], decay);
          }
        });
  }

  std::int64_t elements() const { return elements_; }

 private:
  Kokkos::View<std::int64_t* [5], Kokkos::LayoutRight, Mem> blocks_;  // value, gradient, state offsets, length, decay
  std::int64_t elements_ = 0;
};

}  // namespace kformer::kernels
