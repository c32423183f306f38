// Kernel costs from a machine profile (see kernel_costs.hpp).
#include "predict/kernel_costs.hpp"

namespace kformer::predict {

double gemm_us(const MachineProfile& p, bool bf16, int m, int n, int k, bool backward) {
  const ComputeRates& r = p.rates(bf16);
  for (const auto& g : r.gemm_points)
    if (g.m == m && g.n == n && g.k == k) return backward ? g.backward_us : g.forward_us;
  const double flops = 2.0 * m * n * k;
  const double eff = r.gemm_max_efficiency * flops / (flops + r.gemm_half_efficiency_gflop * 1e9);
  const double one = p.launch_us + flops / (r.gemm_peak_tflops * eff * 1e6);
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
  return p.launch_us + attention_flops(b, t, h, hd, backward) / (r.attention_tflops.at(kind) * 1e6);
}

double memory_us(const MachineProfile& p, const std::string& family, double b) {
  return p.launch_us + b / (p.memory_gbps.at(family) * 1e3);  // GB/s = 1e3 bytes/us
}

namespace bytes {
double adamw(double elements) { return 4.0 * 7 * elements; }
}  // namespace bytes

}  // namespace kformer::predict
