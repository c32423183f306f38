// Kernel costs from a machine profile (see kernel_costs.hpp).
#include "predict/kernel_costs.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>

namespace kformer::predict {

namespace {
// The efficiency curve's time for `flops` of GEMM work, without the launch.
double curve_us(const ComputeRates& r, double flops) {
  const double eff = r.gemm_max_efficiency * flops / (flops + r.gemm_half_efficiency_gflop * 1e9);
  return flops / (r.gemm_peak_tflops * eff * 1e6);
}
}  // namespace

double gemm_us(const MachineProfile& p, bool bf16, int m, int n, int k, bool backward, int out_bytes) {
  const ComputeRates& r = p.rates(bf16);
  // a forward writing another output width than the timings did: the difference in y's bytes,
  // streamed (more for a wider y; less for a narrower one, never below a launch)
  const bool other = bf16 && !backward && r.gemm_output_bytes > 0 && out_bytes > 0 && out_bytes != r.gemm_output_bytes;
  const double extra_us = other ? double(m) * n * (out_bytes - r.gemm_output_bytes) / (stream_gbps(p) * 1e3) : 0;
  for (const auto& g : r.gemm_points)
    if (g.m == m && g.n == n && g.k == k)
      return backward ? g.backward_us : std::max(g.forward_us + extra_us, p.launch_us);
  const double one = p.launch_us + curve_us(r, 2.0 * m * n * k);
  return backward ? 2 * one : std::max(one + extra_us, p.launch_us);
}

double stream_gbps(const MachineProfile& p) {
  double fastest = 0;
  for (const auto& f : memory_families()) fastest = std::max(fastest, p.memory_gbps.at(f));  // not the fill or the reduction
  return p.copy_gbps > 0 ? std::min(p.copy_gbps, fastest) : fastest;
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
  // kformer's batched_gemm runs the products as batched vendor GEMMs with its T*T matrices in the
  // run's precision, as Megatron-LM's attention does: costed so unless calibrated at this shape.
  if (kind == name_of(AttentionKind::batched_gemm))
    return system_attention_us(p, bf16, AttentionModel::batched_gemm, b, t, h, hd, backward);
  // cuDNN's flash attention, where the profile has not timed it: the causal half on the GEMM curve.
  if (kind == name_of(AttentionKind::vendor) && !r.attention_tflops.count(kind))
    return system_attention_us(p, bf16, AttentionModel::cudnn, b, t, h, hd, backward);
  return p.launch_us + attention_flops(b, t, h, hd, backward) / (r.attention_tflops.at(kind) * 1e6);
}

double measured_batched_us(const ComputeRates& r, double scores, int t, int hd) {
  const auto& m = r.batched_gemm_tflops;
  if (m.empty()) return 0;
  // The time of one T*T score at a given head size: 14 hd FLOPs (both products, forward and backward)
  // at its rate at this T.
  const auto per_score = [&](std::map<int, SeqRate>::const_iterator i) { return 14.0 * i->first / (i->second.at(t) * 1e6); };
  if (m.size() == 1 || hd <= m.begin()->first) return scores * per_score(m.begin());
  auto hi = m.lower_bound(hd);
  const bool past = hi == m.end();
  if (past) --hi;  // past the largest head size: along the last two, never below the largest's
  const auto lo = std::prev(hi);
  const double f = double(hd - lo->first) / (hi->first - lo->first);
  const double at = per_score(lo) + f * (per_score(hi) - per_score(lo));
  return scores * (past ? std::max(at, per_score(hi)) : at);
}

double batched_gemm_rate(const ComputeRates& r, int t, int hd) {
  const double per_score = measured_batched_us(r, 1.0, t, hd);
  return per_score > 0 ? 14.0 * hd / (per_score * 1e6) : 0.0;
}

double batched_attention_us(const MachineProfile& p, bool bf16, double score_bytes, int b, int t, int h, int hd,
                            bool backward) {
  const ComputeRates& r = p.rates(bf16);
  const double scores = double(b) * h * t * t;  // elements of the full T*T score matrices
  const double product = 2.0 * scores * hd;     // one of QK^T and PV over the full scores
  const double e = bf16 ? 2 : 4;                // the probabilities and d(scores): the run's precision
  // A product over head size hd moves a T*T matrix for 2*hd FLOPs an element: bound by that
  // matrix's bytes at the memory bandwidth where the GEMM curve would be faster (on an H100 in
  // bf16 below about 300 FLOPs a byte, so at every head size in use).
  const auto one = [&](double tt_bytes) {
    return p.launch_us + std::max(curve_us(r, product), tt_bytes / (p.copy_gbps * 1e3));
  };
  if (!backward)  // QK^T writes the scores, PV reads the probabilities; the softmax between
    return one(scores * score_bytes) + one(scores * e) +
           memory_us(p, "activation", scores * (score_bytes + e), bf16);
  // dP = dO V^T writes d(probabilities) (score_bytes); the softmax's backward reads them and the
  // probabilities and writes d(scores); dV, dQ and dK each read a T*T operand in e bytes.
  return one(scores * score_bytes) + 3 * one(scores * e) +
         memory_us(p, "activation", scores * (score_bytes + 2 * e), bf16);
}

double attention_size_factor(const ComputeRates& r, int b, int h, int t, int hd) {
  const double half = r.attention_half_rate_share;
  if (half <= 0) return 1.0;
  const double share = double(b) * h * t * hd / (2048.0 * 16384.0);  // of the charts' 16k tokens at hidden 2048
  return share >= 1 ? 1.0 : share * (1 + half) / (share + half);
}

double system_attention_us(const MachineProfile& p, bool bf16, AttentionModel model, int b, int t, int h, int hd,
                           bool backward, double dropout) {
  const ComputeRates& r = p.rates(bf16);
  const double product = 2.0 * double(b) * h * t * t * hd;  // one of QK^T and PV over the full scores
  if (model == AttentionModel::flash || model == AttentionModel::cudnn || model == AttentionModel::triton) {
    // Both products over the causal half: one product's FLOPs, the backward 2.5 times them (its
    // recomputed scores, dV, dP, dQ, dK), on the GEMM curve, no faster than the kernel's published
    // ceiling on this GPU where the profile gives it (flash2_tflops, triton_tflops at the call's head
    // size; cuDNN's a pass each): it fills the GPU as a GEMM of its FLOPs would, and its tiles (the
    // online softmax between the products) never reach a large GEMM's rate. predict refuses triton on
    // a profile without its rate (predict_command.cpp): the curve alone would cost it as fast as FA2.
    const double flops = backward ? 2.5 * product : product;
    const double charted = model == AttentionModel::flash    ? r.flash2_tflops.at(hd, t)
                           : model == AttentionModel::triton ? r.triton_tflops.at(hd, t)
                           : backward                        ? r.cudnn_backward_tflops.at(t)
                                                             : r.cudnn_forward_tflops.at(t);
    const double ceiling = charted * attention_size_factor(r, b, h, t, hd);
    const double curve = curve_us(r, flops);
    return p.launch_us + (ceiling > 0 ? std::max(curve, flops / (ceiling * 1e6)) : curve);
  }
  // batched_gemm (Megatron-LM's): the scores in the run's precision, as its fused softmax takes them,
  // both passes together no faster than the benchmark the profile gives (each scaled alike); dropout on
  // the probabilities a pass of its own each way (2 e + 1 bytes an element).
  const double e = bf16 ? 2 : 4, scores = double(b) * h * t * t;
  const double drop = dropout > 0 ? memory_us(p, "activation", scores * (2 * e + 1), bf16) : 0.0;
  const double fwd = batched_attention_us(p, bf16, e, b, t, h, hd, false);
  const double bwd = batched_attention_us(p, bf16, e, b, t, h, hd, true);
  const double measured = measured_batched_us(r, scores, t, hd);
  return drop + (measured > fwd + bwd ? measured / (fwd + bwd) : 1.0) * (backward ? bwd : fwd);
}

namespace {
// Eager PyTorch's operators: `kernels` launches moving `bytes` in all at the activation bandwidth.
double eager_ops_us(const MachineProfile& p, int kernels, double bytes) {
  return (kernels - 1) * p.launch_us + memory_us(p, "activation", bytes);
}
}  // namespace

double eager_rmsnorm_us(const MachineProfile& p, std::int64_t rows, std::int64_t channels, bool backward) {
  const double elements = double(rows) * double(channels);
  const int kernels = backward ? 14 : 8;
  const double bytes_per_element = backward ? 92 : 36;
  return eager_ops_us(p, kernels, bytes_per_element * elements);
}

double residual_stream_us(const MachineProfile& p, ResidualStream r, bool norm, bool backward, std::int64_t rows,
                          std::int64_t channels) {
  const double e = double(rows) * double(channels), dropout = r == ResidualStream::activations_dropout ? 1 : 0;
  if (norm)  // + mean and rstd (fp32, a row's each) and the weight and bias (fp32), or their gradients read and written
    return memory_us(p, "norm", (backward ? 6 : 4) * e + 8.0 * rows + (backward ? 16.0 : 8.0) * channels, true);
  return memory_us(p, "residual", backward ? (6 + 5 * dropout) * e : (6 + dropout) * e, true);
}

double eager_rope_us(const MachineProfile& p, bool bf16, double elements, int tensors) {
  const int kernels = tensors * (bf16 ? 3 : 1);  // each: widen, product, narrow (fp32: the product alone)
  const double bytes_per_element = bf16 ? (2 + 4) + (4 + 4) + (4 + 2) : 4 + 4;
  return eager_ops_us(p, kernels, bytes_per_element * elements);
}

double eager_repeat_kv_us(const MachineProfile& p, bool bf16, double rows, int h, int kv, int hd) {
  if (kv >= h) return 0;
  const double e = bf16 ? 2 : 4;
  return eager_ops_us(p, 2, 2 * rows * hd * (kv + h) * e);  // K and V
}

double eager_swiglu_us(const MachineProfile& p, bool bf16, double elements, bool backward) {
  const double e = bf16 ? 2 : 4;
  const int kernels = backward ? 3 : 2;
  return eager_ops_us(p, kernels, (backward ? 9 : 5) * e * elements);
}

double eager_loss_us(const MachineProfile& p, LossKernels loss, const char* pass, bool bf16, double logits) {
  if (std::strcmp(pass, "xent_whole_rows") == 0) {
    double us = 0;
    for (const char* each : {"xent_local_max", "xent_local_sums", "xent_finish"})
      us += eager_loss_us(p, loss, each, bf16, logits);
    return us;
  }
  if (loss == LossKernels::xentropy) {
    // flash-attn's fused kernels in the logits' own type: forward one read, backward one read and one write
    const double e = bf16 ? 2 : 4;
    if (std::strcmp(pass, "xent_local_max") == 0) return 0;
    const bool forward = std::strcmp(pass, "xent_local_sums") == 0;
    return memory_us(p, "cross_entropy", (forward ? e : 2 * e) * logits);
  }
  const bool vp = loss == LossKernels::vocab_parallel;
  int kernels = 0;
  double bytes = 0;  // a logit's
  if (std::strcmp(pass, "xent_local_max") == 0) {
    kernels = 1, bytes = vp ? 4 : 8;  // max | log_softmax
  } else if (std::strcmp(pass, "xent_local_sums") == 0) {
    kernels = vp ? 3 : 2, bytes = vp ? 8 + 8 + 4 : 4;  // subtract, exp, sum | nll_loss, the zero fill
  } else {
    kernels = 2, bytes = vp ? 8 + 8 : 12;  // divide, the product | scatter, log_softmax's backward
    if (bf16) kernels += 2, bytes += (2 + 4) + (4 + 2);  // the widening and the narrowing
  }
  return eager_ops_us(p, kernels, bytes * logits);
}

double eager_train_metrics_us(const MachineProfile& p, bool bf16, double logits) {
  const int metrics = 2;  // LanguageCrossEntropy, LanguagePerplexity
  const int kernels = bf16 ? 7 : 6;
  const double bytes = (bf16 ? 2 + 4 : 0) + 4 + 4;
  return eager_ops_us(p, metrics * kernels + 3, metrics * bytes * logits);
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
