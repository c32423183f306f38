// Kernel costs from a machine profile (see kernel_costs.hpp).
#include "predict/kernel_costs.hpp"

namespace kformer::predict {

namespace {
// The efficiency curve's time for `flops` of GEMM work, without the launch.
double curve_us(const ComputeRates& r, double flops) {
  const double eff = r.gemm_max_efficiency * flops / (flops + r.gemm_half_efficiency_gflop * 1e9);
  return flops / (r.gemm_peak_tflops * eff * 1e6);
}
}  // namespace

double gemm_us(const MachineProfile& p, bool bf16, int m, int n, int k, bool backward) {
  const ComputeRates& r = p.rates(bf16);
  for (const auto& g : r.gemm_points)
    if (g.m == m && g.n == n && g.k == k) return backward ? g.backward_us : g.forward_us;
  const double one = p.launch_us + curve_us(r, 2.0 * m * n * k);
  return backward ? 2 * one : one;
}

double attention_flops(int b, int t, int h, int hd, bool backward) {
  const double f = 2.0 * b * h * double(t) * t * hd;  // QK^T and AV over the causal half
  return backward ? 2 * f : f;
}

double attention_us(const MachineProfile& p, bool bf16, const std::string& kind, int b, int t, int h, int kv, int hd,
                    bool backward) {
  const ComputeRates& r = p.rates(bf16);
  for (const auto& a : r.attention_points)
    if (a.kind == kind && a.b == b && a.t == t && a.h == h && a.kv == kv && a.hd == hd)
      return backward ? a.backward_us : a.forward_us;
  // kformer's batched_gemm runs the products as batched vendor GEMMs, as the published systems'
  // attention does: costed as that model unless calibrated at this shape.
  if (kind == name_of(AttentionKind::batched_gemm))
    return system_attention_us(p, bf16, AttentionModel::batched_gemm, b, t, h, hd, backward);
  return p.launch_us + attention_flops(b, t, h, hd, backward) / (r.attention_tflops.at(kind) * 1e6);
}

double system_attention_us(const MachineProfile& p, bool bf16, AttentionModel model, int b, int t, int h, int hd,
                           bool backward) {
  const ComputeRates& r = p.rates(bf16);
  const double scores = double(b) * h * t * t;  // elements of the full T*T score matrices
  const double product = 2.0 * scores * hd;     // one of QK^T and PV over the full scores
  if (model == AttentionModel::flash)  // both products over the causal half: one product's FLOPs
    return p.launch_us + curve_us(r, backward ? 2.5 * product : product);
  // batched_gemm: forward 2 products and the softmax (read scores, write probabilities); backward
  // 4 products and the softmax's gradient (read probabilities and their gradient, write the scores').
  const int products = backward ? 4 : 2;
  const double element = bf16 ? 2 : 4;
  const double softmax_bytes = scores * element * (backward ? 3 : 2);
  return products * (p.launch_us + curve_us(r, product)) + memory_us(p, "activation", softmax_bytes, bf16);
}

double memory_us(const MachineProfile& p, const std::string& family, double b, bool bf16) {
  const auto f = p.bf16.memory_gbps.find(family);
  const double gbps = bf16 && f != p.bf16.memory_gbps.end() ? f->second : p.memory_gbps.at(family);
  return p.launch_us + b / (gbps * 1e3);  // GB/s = 1e3 bytes/us
}

namespace bytes {
double adamw(double elements) { return 4.0 * 7 * elements; }
}  // namespace bytes

}  // namespace kformer::predict
