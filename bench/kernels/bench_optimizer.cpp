// AdamW over a whole model's tensors, GPT-2 124M's 148 of them: one launch over every segment
// (AdamWSegments, what the optimizer runs since session 20) and one adamw_update launch per tensor
// (what it ran before), each judged against the copy beside it. Bytes: the values and both moments
// read and written, the fp32 gradient read, 28 a parameter. On a GPU the gap between the two cases
// is the launches of the 98 tensors of a few hundred or thousand elements; on a CPU it is small.
// Names: adamw/gpt2-124m, and probe_per_tensor/adamw/gpt2-124m for the launch per tensor (a probe,
// as probe_one_lane: left out of the memory-bound targets, gpu_perf_summary.py).
#include <memory>
#include <utility>
#include <vector>

#include "adamw_segments.hpp"
#include "ceilings.hpp"

namespace kformer::bench {
namespace {

template <class T>
using V = kernels::DView<T, Exec>;
using Segment = kernels::AdamWSegments<Exec>::Segment;

// GPT-2 124M's parameter tensors back to back in one buffer, the matrices with weight decay.
std::vector<Segment> gpt2_124m() {
  const std::int64_t C = 768, vocab = 50257, ctx = 1024;
  std::vector<std::pair<std::int64_t, bool>> sizes{{vocab * C, true}, {ctx * C, true}};
  for (int layer = 0; layer < 12; ++layer)  // ln1 w b, qkv w b, proj w b, ln2 w b, fc1 w b, fc2 w b
    for (const auto& t : std::vector<std::pair<std::int64_t, bool>>{
             {C, false}, {C, false}, {3 * C * C, true}, {3 * C, false}, {C * C, true}, {C, false},
             {C, false}, {C, false}, {4 * C * C, true}, {4 * C, false}, {4 * C * C, true}, {C, false}})
      sizes.push_back(t);
  sizes.push_back({C, false}), sizes.push_back({C, false});  // the final norm
  std::vector<Segment> segs;
  std::int64_t at = 0;
  for (const auto& [n, decay] : sizes) segs.push_back({at, at, at, n, decay}), at += n;
  return segs;
}

void register_adamw() {
  const std::vector<Segment> segs = gpt2_124m();
  const std::int64_t n = segs.back().value_offset + segs.back().length;
  kernels::AdamWHyper h;
  h.weight_decay = 0.1f;
  struct Buffers {
    V<float*> p, g, m, v;
    explicit Buffers(std::int64_t n) : p("p", n), g("g", n), m("m", n), v("v", n) { Kokkos::deep_copy(g, 0.01f); }
  };
  add_mem("adamw/gpt2-124m", [=] {
    auto b = std::make_shared<Buffers>(n);
    auto multi = std::make_shared<kernels::AdamWSegments<Exec>>(segs);
    return std::function<void()>([=] { multi->run(Exec(), b->p.data(), b->g.data(), b->m.data(), b->v.data(), h); });
  }, 28.0 * double(n));
  add_mem("probe_per_tensor/adamw/gpt2-124m", [=] {
    auto b = std::make_shared<Buffers>(n);
    return std::function<void()>([=] {
      for (const Segment& s : segs) {
        kernels::AdamWHyper hs = h;
        hs.weight_decay = s.decay ? h.weight_decay : 0.f;
        const auto part = [&](const V<float*>& x) { return Kokkos::subview(x, std::make_pair(s.value_offset, s.value_offset + s.length)); };
        kernels::adamw_update(Exec(), part(b->p), part(b->g), part(b->m), part(b->v), hs);
      }
    });
  }, 28.0 * double(n));
}

const bool registered = (register_adamw(), true);

}  // namespace
}  // namespace kformer::bench
