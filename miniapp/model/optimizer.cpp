// AdamW, ZeRO-aware (see optimizer.hpp).
#include "model/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "adamw.hpp"

namespace kformer {

double learning_rate(const OptimizerSettings& s, int it) {
  if (s.warmup > 0 && it <= s.warmup) return s.lr * it / s.warmup;
  const double progress = std::min(1.0, double(it - s.warmup) / std::max(1, s.steps - s.warmup));
  const double lo = s.lr / 10;
  return lo + 0.5 * (s.lr - lo) * (1 + std::cos(3.14159265358979323846 * progress));
}

Optimizer::Optimizer(ParamStore& params, const OptimizerSettings& s, comm::Communicator* dp, int tp_rank,
                     int mirror_layer)
    : p_(params), s_(s), dp_(dp), tp_rank_(tp_rank) {
  const int shards = p_.shards(), me = p_.shard_rank();
  for (std::size_t ui = 0; ui < p_.units().size(); ++ui) {
    const ParamUnit& u = p_.units()[ui];
    const std::int64_t len = u.size / shards, lo = u.offset + me * len, hi = lo + len;
    for (std::size_t i = u.first_slot; i < u.first_slot + u.n_slots; ++i) {
      const ParamSlot& t = p_.slots()[i];
      const std::int64_t a = std::max(lo, t.offset), b = std::min(hi, t.offset + t.rows * t.cols);
      if (a >= b) continue;
      segments_.push_back(
          {ui, i, a - lo, a, state_size_, b - a, t.spec.decay, t.spec.split == Split::none, u.layer == mirror_layer});
      state_size_ += b - a;
    }
  }
  const MemoryKindScope kind(MemoryKind::optimizer);
  m_ = device_buffer<float*>("kformer::adam_m", state_size_);
  v_ = device_buffer<float*>("kformer::adam_v", state_size_);

  // What the gradient norm counts here. Without ZeRO every data-parallel rank holds the same full
  // gradients: rank 0 of the group counts them. A tensor replicated over TP is counted by TP rank
  // 0 only; the last stage's copy of the tied table not at all. Neighbouring runs are merged.
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  if (s_.zero != 0 || !dp_ || dp_->rank() == 0)
    for (const auto& g : segments_) {
      if ((g.replicated && tp_rank_ != 0) || g.mirror) continue;
      // where the optimizer reads it: the flat layout, or this rank's shard (grad_shards.cpp)
      const std::int64_t at = p_.shard_grad_offset(g.unit) + g.shard_offset;
      if (!ranges.empty() && ranges.back().first + ranges.back().second == at)
        ranges.back().second += g.length;
      else
        ranges.emplace_back(at, g.length);
    }
  grad_sq_ = std::make_unique<kernels::SumOfSquares<Exec>>(ranges);

  std::vector<kernels::AdamWSegments<Exec>::Segment> runs;
  for (const auto& g : segments_)
    runs.push_back({p_.shard_value_offset(g.unit) + g.shard_offset, p_.shard_grad_offset(g.unit) + g.shard_offset,
                    g.state_offset, g.length, g.decay});
  adamw_ = std::make_unique<kernels::AdamWSegments<Exec>>(runs);
}

void Optimizer::grad_sq_local(const Exec& exec, const DV<double*>& out) const {
  if (p_.grads_bf16())
    grad_sq_->run(exec, p_.grads16().data(), Kokkos::subview(out, 0));
  else
    grad_sq_->run(exec, p_.grads().data(), Kokkos::subview(out, 0));
}

void Optimizer::step(int iteration, double clip_scale) {
  Exec exec;
  kernels::AdamWHyper h;
  h.lr = static_cast<float>(kformer::learning_rate(s_, iteration));
  h.step = iteration;
  h.grad_scale = static_cast<float>(clip_scale);
  h.weight_decay = static_cast<float>(s_.weight_decay);  // on the segments that decay
  if (p_.grads_bf16())
    adamw_->run(exec, p_.values().data(), p_.grads16().data(), m_.data(), v_.data(), h);
  else
    adamw_->run(exec, p_.values().data(), p_.grads().data(), m_.data(), v_.data(), h);
  p_.allgather_values();  // ZeRO-1/2: every rank gets the updated whole
  p_.drop_gathered();     // ZeRO-3: gathered copies are stale
}

}  // namespace kformer
