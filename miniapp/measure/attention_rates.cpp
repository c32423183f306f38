// Attention kernels timed (see attention_rates.hpp).
#include "measure/attention_rates.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "attention.hpp"
#include "attention_vendor.hpp"
#include "convert.hpp"
#include "counter_rng.hpp"
#include "gemm.hpp"
#include "measure/timed.hpp"
#include "platform/device.hpp"

namespace kformer {
namespace {

// Causal attention's FLOPs as kformer counts them (kernels/attention/attention.hpp's call record): QK^T and
// AV over the whole square, twice that backward.
double attention_flops(const BlockDims& d, bool backward) {
  return 2.0 * d.B * d.Hl * double(d.T) * d.T * d.hd * (backward ? 2 : 1);
}

template <class T>
DV<T***> random_tokens(const char* name, const BlockDims& d, int width, std::uint64_t key) {
  DV<float***> f(std::string(name) + "_f32", d.B, d.T, width);
  const auto flat = DV<float**>(f.data(), std::size_t(d.B) * d.T, width);
  kernels::fill_normal_block(Exec(), flat, key, width, 0, 0, 0.5f);  // real numbers: zeros can run faster
  if constexpr (std::is_same<T, float>::value) {
    return f;
  } else {
    DV<T***> t(std::string(name), d.B, d.T, width);
    kernels::convert(Exec(), DV<T**>(t.data(), std::size_t(d.B) * d.T, width), flat);
    return t;
  }
}

// A kind's output and input gradients at the timed shape, as fp32 on the host.
struct AttentionResults {
  std::vector<float> out, dqkv;
};

template <class T>
std::vector<float> host_floats(const DV<T***>& x) {
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
  std::vector<float> v(h.size());
  const T* p = h.data();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(p[i]);
  return v;
}

// Every kind reads the same inputs (the keys 4 and 5), so their results compare. `results`, where
// given, receives the last call's.
template <class T>
AttentionTiming time_kind(const BlockDims& d, AttentionKind k, double window_ms, AttentionResults* results) {
  const DV<T***> qkv = random_tokens<T>("attention_qkv", d, d.qkv_width(), 4);
  const DV<T***> dout = random_tokens<T>("attention_dout", d, d.q_width(), 5);
  const DV<T***> out("attention_out", d.B, d.T, d.q_width()), dqkv("attention_dqkv", d.B, d.T, d.qkv_width());
  auto state = kernels::make_typed_attention_state<Exec, T>(k, d.B, d.T, d.Hl);
  AttentionTiming t;
  t.forward_us = mean_us([&] { kernels::attention_forward(Exec(), out, state, qkv, d.Hl, d.KVl); }, window_ms);
  t.backward_us =
      mean_us([&] { kernels::attention_backward(Exec(), dqkv, state, dout, qkv, out, d.Hl, d.KVl); }, window_ms);
  if (results) *results = {host_floats(out), host_floats(dqkv)};
  return t;
}

// time_kind in the run's precision.
AttentionTiming time_in(const BlockDims& d, AttentionKind kind, Precision precision, double window_ms,
                        AttentionResults* results) {
  return precision == Precision::bf16 ? time_kind<kernels::bf16>(d, kind, window_ms, results)
                                      : time_kind<float>(d, kind, window_ms, results);
}

// ||a - b|| / max(||a||, ||b||), in double; +inf where any of it is not finite.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, na = 0, nb = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double x = a[i], y = b[i];
    diff += (x - y) * (x - y);
    na += x * x;
    nb += y * y;
  }
  if (!std::isfinite(diff) || !std::isfinite(na) || !std::isfinite(nb) || a.size() != b.size())
    return std::numeric_limits<double>::infinity();
  const double n = std::max(na, nb);
  return n > 0 ? std::sqrt(diff / n) : 0.0;
}

}  // namespace

std::vector<AttentionKind> attention_kinds_built(Precision precision) {
  std::vector<AttentionKind> kinds{AttentionKind::naive, AttentionKind::fused};
  if (kernels::gemm_vendor_available<Exec>()) kinds.push_back(AttentionKind::batched_gemm);
  if constexpr (kernels::attention_vendor_available<Exec>()) {
#if defined(KOKKOS_ENABLE_CUDA)
    // Built, and cuDNN opens on this machine (it is loaded at run time: attention_cudnn.cpp).
    if (precision == Precision::bf16 && kernels::detail::cudnn_attention_loads()) kinds.push_back(AttentionKind::vendor);
#endif
  }
  return kinds;
}

bool attention_vendor_built() { return kernels::attention_vendor_available<Exec>(); }

AttentionTiming time_attention(const BlockDims& d, AttentionKind kind, Precision precision, double window_ms) {
  return time_in(d, kind, precision, window_ms, nullptr);
}

BlockDims startup_attention_shape(const BlockDims& run, double flop_budget) {
  BlockDims d = run;
  const int group = d.Hl / d.KVl;  // query heads per key/value head
  const auto total = [&] { return attention_flops(d, false) + attention_flops(d, true); };
  while (d.B > 1 && total() > flop_budget) d.B = (d.B + 1) / 2;
  while (d.KVl > 1 && total() > flop_budget) d.KVl = (d.KVl + 1) / 2, d.Hl = d.KVl * group;
  while (d.T > 64 && total() > flop_budget) d.T /= 2;
  return d;
}

std::string describe_shape(const BlockDims& d) {
  return "B=" + std::to_string(d.B) + " T=" + std::to_string(d.T) + " heads=" + std::to_string(d.Hl) + "/" +
         std::to_string(d.KVl) + " hd=" + std::to_string(d.hd);
}

AttentionTrial measure_attention_candidates(const BlockDims& d, Precision precision,
                                            const std::vector<AttentionKind>& candidates) {
  AttentionTrial trial{};
  const double flops = attention_flops(d, false) + attention_flops(d, true);
  std::vector<AttentionResults> results(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const AttentionTiming t = time_in(d, candidates[i], precision, 20, &results[i]);
    trial.tflops[static_cast<int>(candidates[i])] = flops / (t.forward_us + t.backward_us) / 1e6;
  }
  for (std::size_t i = 0; i < candidates.size() && candidates.size() > 1; ++i) {
    double nearest = std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < candidates.size(); ++j) {
      if (j == i) continue;
      const double apart = std::max(relative_difference(results[i].out, results[j].out),
                                    relative_difference(results[i].dqkv, results[j].dqkv));
      nearest = std::min(nearest, apart);
    }
    trial.diffs[static_cast<int>(candidates[i])] = nearest;
  }
  return trial;
}

}  // namespace kformer
