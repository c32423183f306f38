// kernels.attention=auto on a profile (see attention_auto.hpp).
#include "predict/attention_auto.hpp"

#include <algorithm>

#include "model/model_spec.hpp"
#include "predict/kernel_costs.hpp"
#include "train/make_plan.hpp"

namespace kformer::predict {

namespace {
// Whether the profile rates `kind` in the run's precision (attention_auto.hpp's list).
bool rated(const ComputeRates& r, AttentionKind kind, bool bf16) {
  if (kind == AttentionKind::vendor && !bf16) return false;
  if (r.attention_tflops.count(name_of(kind))) return true;
  // calibrate timed it on this machine (its points, at its shapes; attention_us costs other shapes)
  for (const AttentionPoint& a : r.attention_points)
    if (a.kind == name_of(kind)) return true;
  if (kind == AttentionKind::vendor) return r.cudnn_forward_tflops.given();
  if (kind == AttentionKind::batched_gemm) return !r.batched_gemm_tflops.empty();
  return false;
}
}  // namespace

std::vector<AttentionKind> attention_candidates(const RunSettings& s, const MachineProfile& p) {
  if (s.kernels.attention != AttentionSetting::automatic) return {fixed_attention(s.kernels.attention)};
  const bool bf16 = s.bf16();
  const ComputeRates& r = p.rates(bf16);
  const ModelShape m = model_shape(s);
  const int h = m.n_heads / m.tp, kv = (m.n_kv_heads > 0 ? m.n_kv_heads : m.n_heads) / m.tp;
  std::vector<std::pair<double, AttentionKind>> timed;  // (forward + backward us, kind)
  // fused first: the stable sort keeps it ahead of a kind no faster
  for (const AttentionKind k : {AttentionKind::fused, AttentionKind::naive, AttentionKind::batched_gemm,
                                AttentionKind::vendor}) {
    if (!rated(r, k, bf16)) continue;
    const auto us = [&](bool backward) {
      return attention_us(p, bf16, name_of(k), s.train.micro_batch, s.train.seq_len, h, kv, m.head_dim, backward);
    };
    timed.emplace_back(us(false) + us(true), k);
  }
  std::stable_sort(timed.begin(), timed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<AttentionKind> out;
  for (const auto& t : timed) out.push_back(t.second);
  if (out.empty()) out.push_back(AttentionKind::fused);  // the profile rates none: kformer's default
  return out;
}

AttentionKind costed_attention(const RunSettings& s, const MachineProfile& p) {
  return attention_candidates(s, p).front();
}

AttentionKind costed_attention(const RunPlan& layout, const MachineProfile& p) {
  // Another system's attention is costed, not kformer's: the layout's kind then only sizes the memory,
  // as fused's (a flash kernel's row statistics; rows with materialised scores name naive).
  const RunSettings& s = layout.settings;
  if (s.kernels.attention != AttentionSetting::automatic) return fixed_attention(s.kernels.attention);
  if (s.predict.attention != AttentionModel::kformer) return AttentionKind::fused;
  const std::vector<AttentionKind> kinds = attention_candidates(s, p);
  for (const AttentionKind k : kinds)
    if (fits_device(with_attention(layout, k), p)) return k;
  return AttentionKind::fused;  // start-up's, where no candidate fits (then the estimate says so)
}

double device_bytes(const RunSettings& s, const MachineProfile& p) {
  return s.memory_limit_gb > 0 ? s.memory_limit_gb * 1e9 : p.memory_gb * 1e9;
}

bool fits_device(const RunPlan& plan, const MachineProfile& p) {
  return within_device(plan.memory.total() + p.process_baseline_gb * 1e9, device_bytes(plan.settings, p));
}

}  // namespace kformer::predict
