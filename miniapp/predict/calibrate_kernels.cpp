// Kernel calibration (see calibrate_kernels.hpp).
#include "predict/calibrate_kernels.hpp"

#include <Kokkos_Timer.hpp>

#include <algorithm>
#include <set>
#include <tuple>
#include <type_traits>

#include "activations.hpp"
#include "adamw.hpp"
#include "attention.hpp"
#include "model/block.hpp"
#include "counter_rng.hpp"
#include "convert.hpp"
#include "cross_entropy.hpp"
#include "platform/device.hpp"
#include "embedding.hpp"
#include "measure/attention_rates.hpp"
#include "measure/fma_peak.hpp"
#include "measure/timed.hpp"
#include "gemm.hpp"
#include "predict/kernel_costs.hpp"
#include "layernorm.hpp"
#include "model/model_spec.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"
#include "sum_of_squares.hpp"
#include "train/step_work.hpp"

namespace kformer::predict {
namespace kk = kernels;
namespace {

// The median of short calls: the launch overhead, which preemption should not inflate.
template <class F>
double median_us(F&& f, int reps) {
  Exec exec;
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    Kokkos::Timer timer;
    f();
    exec.fence();
    t.push_back(timer.seconds() * 1e6);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

DV<float**> random(const char* name, std::int64_t rows, std::int64_t cols, std::uint64_t key, float sd = 1.0f) {
  DV<float**> v(std::string(name), rows, cols);
  kk::fill_normal_block(Exec(), v, key, cols, 0, 0, sd);
  return v;
}

// A random matrix in element type T (bf16: rounded from the fp32 draw).
template <class T>
DV<T**> random_as(const char* name, std::int64_t rows, std::int64_t cols, std::uint64_t key, float sd = 1.0f) {
  const DV<float**> f = random(name, rows, cols, key, sd);
  if constexpr (std::is_same<T, float>::value) {
    return f;
  } else {
    DV<T**> t(std::string(name), rows, cols);
    kk::convert(Exec(), t, f);
    return t;
  }
}

// One GEMM shape's forward and backward in element type T (the run's GEMM inputs).
template <class T>
void measure_gemm(int m, int n, int k, kk::GemmImpl impl, ComputeRates& r) {
  const DV<T**> x = random_as<T>("x", m, k, 1), w = random_as<T>("w", n, k, 2, 0.02f), dy = random_as<T>("dy", m, n, 3);
  DV<float**> y("y", m, n), dx("dx", m, k), dw("dw", n, k);
  GemmPoint g{m, n, k, 0, 0};
  const DV<const T**> cx = x, cw = w, cdy = dy;
  g.forward_us = mean_us([&] { kk::matmul_forward(Exec(), impl, y, cx, cw); });
  g.backward_us = mean_us([&] { kk::matmul_backward(Exec(), impl, dx, dw, DV<float*>(), cdy, cx, cw); });
  r.gemm_points.erase(std::remove_if(r.gemm_points.begin(), r.gemm_points.end(),
                                     [&](const GemmPoint& q) { return q.m == m && q.n == n && q.k == k; }),
                      r.gemm_points.end());
  r.gemm_points.push_back(g);
  // bf16: y above is fp32, so are the points' outputs (and the curve's fitted to them)
  if constexpr (!std::is_same<T, float>::value) r.gemm_output_bytes = int(sizeof(float));
}

// A block's causal attention with q, k, v (and the gradients read) in `precision`: one kind's
// point (measure/attention_rates.hpp times it as start-up's kernels.attention=auto does).
void measure_attention(const BlockDims& d, kk::AttentionKind k, Precision precision, ComputeRates& r) {
  const std::string kind = name_of(k);  // the profile's key
  const AttentionTiming t = time_attention(d, k, precision, 30);
  AttentionPoint a{d.B, d.T, d.Hl, d.KVl, d.hd, kind, t.forward_us, t.backward_us};
  r.attention_points.erase(std::remove_if(r.attention_points.begin(), r.attention_points.end(),
                                          [&](const AttentionPoint& q) {
                                            return q.kind == kind && q.b == a.b && q.t == a.t && q.h == a.h &&
                                                   q.kv == a.kv && q.hd == a.hd;
                                          }),
                           r.attention_points.end());
  r.attention_points.push_back(a);
  r.attention_tflops[kind] = (attention_flops(d.B, d.T, d.Hl, d.hd, false) + attention_flops(d.B, d.T, d.Hl, d.hd, true)) /
                             ((a.forward_us + a.backward_us) * 1e6);
}

// The kinds a profile gets in `precision`: kernels.attention's own, or under auto every kind this
// build runs in that precision, so that predict can cost auto's choice (and any kind) from it.
std::vector<kk::AttentionKind> profiled_attention(AttentionSetting setting, Precision precision) {
  const std::vector<kk::AttentionKind> built = attention_kinds_built(precision);
  if (setting == AttentionSetting::automatic) return built;
  const kk::AttentionKind k = fixed_attention(setting);
  return std::find(built.begin(), built.end(), k) == built.end() ? std::vector<kk::AttentionKind>{}
                                                                 : std::vector<kk::AttentionKind>{k};
}

// GB/s of a family: its bytes over its time less the launch overhead.
double rate(double bytes, double us, double launch_us) { return bytes / (std::max(us - launch_us, 0.05 * us) * 1e3); }

// A family's calls, timed and described: their bytes are what the call describes (the same
// count predict costs it by, kernel_costs.hpp), so a family measured at a deck's shapes predicts
// those shapes exactly.
struct FamilyTime {
  double us = 0, bytes = 0;
  int calls = 0;
  template <class F>
  void add(F&& f) {
    us += mean_us(f);
    WorkLog log;
    {
      const kk::Describing describing(log);
      f();
    }
    for (const WorkEntry& e : log.entries) bytes += e.call.bytes, ++calls;
  }
  double gbps(double launch_us) const { return rate(bytes, us, calls * launch_us); }
};

// GB/s of the norm, residual and activation families on activations of element type T (bf16:
// x, y and their gradients bf16, the norms' statistics and weights fp32, as train.precision=bf16
// runs them; half the bytes need not take half the time: on an H100 the streaming kernels moved
// half the GB/s in bf16).
template <class T>
std::map<std::string, double> activation_families(const ModelShape& s, const BlockDims& d, double L) {
  Exec exec;
  const DV<T**> x = random_as<T>("x", d.N(), d.C, 6), dy = random_as<T>("dy", d.N(), d.C, 7);
  const DV<T**> y("y", d.N(), d.C), dx("dx", d.N(), d.C);
  const DV<float*> wv("w", d.C), dwv("dw", d.C), bv("b", d.C), dbv("db", d.C), mean("mean", d.N()), rstd("rstd", d.N());
  Kokkos::deep_copy(wv, 1.0f);
  FamilyTime norm, residual, activation;
  if (s.gpt) {
    norm.add([&] { kk::layernorm_forward(exec, y, mean, rstd, x, wv, bv); });
    norm.add([&] { kk::layernorm_backward(exec, dx, dwv, dbv, dy, x, wv, mean, rstd); });
  } else {
    norm.add([&] { kk::rmsnorm_forward(exec, y, rstd, x, wv); });
    norm.add([&] { kk::rmsnorm_backward(exec, dx, dwv, dy, x, wv, rstd); });
  }
  residual.add([&] { kk::residual_forward(exec, y, x, dy); });
  const DV<T**> in = random_as<T>("in", d.N(), d.mlp_in_width(), 8), dact = random_as<T>("dact", d.N(), d.Fl, 9);
  const DV<T**> act("act", d.N(), d.Fl), din("din", d.N(), d.mlp_in_width());
  if (s.gpt) {
    activation.add([&] { kk::gelu_forward(exec, act, in); });
    activation.add([&] { kk::gelu_backward(exec, din, in, dact); });
  } else {
    activation.add([&] { kk::swiglu_forward(exec, act, in); });
    activation.add([&] { kk::swiglu_backward(exec, din, in, dact); });
  }
  return {{"norm", norm.gbps(L)}, {"residual", residual.gbps(L)}, {"activation", activation.gbps(L)}};
}

void measure_memory_families(const ModelShape& s, const BlockDims& d, MachineProfile& p) {
  Exec exec;
  const double L = p.launch_us;
  for (const auto& f : activation_families<float>(s, d, L)) p.memory_gbps[f.first] = f.second;
  const DV<float**> y("y", d.N(), d.C), dy = random("dy", d.N(), d.C, 7);
  FamilyTime rope, embedding, xent;

  if (!s.gpt || d.hd % 2 == 0) {
    const DV<float**> q = random("q", d.N(), d.qkv_width(), 10);
    const auto t3 = as_tensor3(q.data(), d.B, d.T, q.extent(1));
    rope.add([&] { kk::rope_forward(exec, t3, t3, d.Hl + d.KVl, d.hd, 0); });
    p.memory_gbps["rope"] = rope.gbps(L);
  }

  const int Vl = s.vocab_padded / s.tp;
  const DV<float**> table = random("table", Vl, d.C, 11, 0.02f), dtable("dtable", Vl, d.C);
  std::vector<std::int32_t> tokens(std::size_t(d.N()));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::int32_t((i * 7919) % std::size_t(s.vocab));
  DV<std::int32_t*> tok("tokens", d.N());
  auto th = Kokkos::create_mirror_view(tok);
  for (std::size_t i = 0; i < tokens.size(); ++i) th(i) = tokens[i];
  Kokkos::deep_copy(tok, th);
  const DV<std::int32_t*> packed("token_index", kk::token_index_capacity(tokens.size()));
  auto packed_host = Kokkos::create_mirror_view(packed);
  const auto index = kk::make_token_index<Exec>(tokens.data(), tokens.size(), 0, Vl, packed_host.data(), packed);
  Kokkos::deep_copy(packed, packed_host);
  embedding.add([&] { kk::embedding_forward(exec, y, tok, table, 0, DV<float**>(), d.T); });
  embedding.add([&] { kk::embedding_backward(exec, dtable, dy, index); });
  p.memory_gbps["embedding"] = embedding.gbps(L);

  // The loss as the deck's layout runs it: where one rank holds the vocabulary, the one pass over
  // whole rows that writes the gradient over the fp32 logits (Stage::head_backward); under TP the
  // three passes. On a CPU the one pass re-reads each row from cache, and ran 2.6 times the three
  // passes' rate per described byte (session 52, output.kernel_times against predict.breakdown).
  const DV<float**> logits = random("logits", d.N(), Vl, 12), stats("stats", 2, d.N());
  const DV<float*> lmax("lmax", d.N()), loss("loss", d.N());
  if (s.tp == 1) {
    xent.add([&] { kk::xent_whole_rows(exec, loss, logits, DV<const float**>(logits), DV<const std::int32_t*>(tok), s.vocab, 1.0f); });
  } else {
    xent.add([&] { kk::xent_local_max(exec, lmax, logits, 0, s.vocab); });
    xent.add([&] { kk::xent_local_sums(exec, stats, logits, tok, lmax, 0, s.vocab); });
    const DV<float**> dlogits("dlogits", d.N(), Vl);
    xent.add([&] { kk::xent_finish(exec, loss, dlogits, logits, tok, lmax, stats, 0, s.vocab, 1.0f); });
  }
  p.memory_gbps["cross_entropy"] = xent.gbps(L);

  // AdamW over as many elements as the deck's model has (a small model's state stays in cache).
  const std::int64_t params = count_params(model_params(s));
  const std::int64_t n = std::clamp<std::int64_t>(params, 1 << 12, 1 << 24);
  const DV<float*> pv("p", n), g("g", n), m("m", n), v("v", n);
  Kokkos::deep_copy(g, 0.01f);
  kk::AdamWHyper h;
  p.memory_gbps["optimizer"] = rate(bytes::adamw(double(n)), mean_us([&] { kk::adamw_update(exec, pv, g, m, v, h); }), L);
  // The step's fill of its gradient buffer and the gradient norm's sum of squares over it, over as
  // many elements as the model has up to 256 MB (one array where AdamW streams four: at AdamW's 64 MB
  // a CPU's cache held much of it, and both ran twice as fast as in the step). Without them both took
  // the residual add's rate, 2-3 times fast on a CPU, where a fill's stores first read their lines
  // (session 52, output.kernel_times against predict.breakdown).
  const std::int64_t n1 = std::clamp<std::int64_t>(params, 1 << 12, 1 << 26);
  const DV<float*> grads("grads", n1);
  FamilyTime fill, reduction;
  fill.add([&] { kk::fill(exec, grads, 0.0f); });
  p.memory_gbps["copy"] = fill.gbps(L);
  const kk::SumOfSquares<Exec> squares({{0, n1}});
  const Kokkos::View<double, Exec::memory_space> sum("sum_of_squares");
  reduction.add([&] { squares.run(exec, grads.data(), sum); });
  p.memory_gbps["reduction"] = reduction.gbps(L);
  if (!p.memory_gbps.count("rope")) p.memory_gbps["rope"] = p.memory_gbps["residual"];
  p.copy_gbps = 2.0 * 4 * n / (mean_us([&] { Kokkos::deep_copy(exec, m, pv); }) * 1e3);
}

// The curve's ceiling and half-efficiency point, from the measured GEMMs' forward rates; the
// ceiling is at least the FMA peak (`peak_tflops`).
void fit_gemm_curve(ComputeRates& r, double peak_tflops, double launch_us) {
  double best = 0;
  for (const auto& g : r.gemm_points) best = std::max(best, 2.0 * g.m * g.n * g.k / (g.forward_us * 1e6));
  r.gemm_peak_tflops = std::max(peak_tflops, best);
  r.gemm_max_efficiency = std::min(1.0, best / r.gemm_peak_tflops);
  std::vector<double> half;
  for (const auto& g : r.gemm_points) {
    const double flops = 2.0 * g.m * g.n * g.k;
    const double eff = flops / ((g.forward_us - launch_us > 0 ? g.forward_us - launch_us : g.forward_us) * 1e6) /
                       r.gemm_peak_tflops;
    if (eff > 0 && eff < r.gemm_max_efficiency) half.push_back(flops * (r.gemm_max_efficiency / eff - 1) / 1e9);
  }
  std::sort(half.begin(), half.end());
  r.gemm_half_efficiency_gflop = half.empty() ? 0 : half[half.size() / 2];
  if (!r.attention_tflops.empty())
    for (const char* k : {"naive", "fused"})
      if (!r.attention_tflops.count(k)) r.attention_tflops[k] = r.attention_tflops.begin()->second;
}

}  // namespace

void calibrate_kernels(const RunSettings& cfg, kk::GemmImpl impl, const std::vector<int>& tps, MachineProfile& p) {
  Exec exec;
  const DV<float*> one("one", 1);
  p.launch_us = median_us([&] { kk::residual_forward(exec, as_matrix(one.data(), 1, 1), as_matrix(one.data(), 1, 1), as_matrix(one.data(), 1, 1)); }, 21);
  p.fma_peak_tflops = measure_fma_peak().tflops;
  for (int tp : tps) {
    const ModelShape s = model_shape(cfg.model, tp, cfg.parallel.sequence_parallel);
    const BlockDims d = block_dims(s, cfg.train.micro_batch, cfg.train.seq_len);
    // Both precisions, whichever the deck trains in: a profile costs fp32 and bf16 runs alike.
    for (const auto& g : std::set<std::tuple<int, int, int>>{{d.N(), d.qkv_width(), d.C},
                                                             {d.N(), d.C, d.q_width()},
                                                             {d.N(), d.mlp_in_width(), d.C},
                                                             {d.N(), d.C, d.Fl},
                                                             {d.N(), s.vocab_padded / s.tp, d.C}}) {
      measure_gemm<float>(std::get<0>(g), std::get<1>(g), std::get<2>(g), impl, p.fp32);
      measure_gemm<kk::bf16>(std::get<0>(g), std::get<1>(g), std::get<2>(g), impl, p.bf16);
    }
    for (const kk::AttentionKind k : profiled_attention(cfg.kernels.attention, Precision::fp32))
      measure_attention(d, k, Precision::fp32, p.fp32);
    for (const kk::AttentionKind k : profiled_attention(cfg.kernels.attention, Precision::bf16))
      measure_attention(d, k, Precision::bf16, p.bf16);
    if (tp == tps.front()) {
      measure_memory_families(s, d, p);
      p.bf16.memory_gbps = activation_families<kk::bf16>(s, d, p.launch_us);
    }
  }
  fit_kernel_curves(p);
}

void fit_kernel_curves(MachineProfile& p) {
  fit_gemm_curve(p.fp32, p.fma_peak_tflops, p.launch_us);
  fit_gemm_curve(p.bf16, p.fma_peak_tflops, p.launch_us);
}

}  // namespace kformer::predict
