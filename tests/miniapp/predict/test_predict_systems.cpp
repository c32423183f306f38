// How the published systems ran, as predict costs them (the predict.* keys a predict.system
// preset sets; docs/predict.md, "Systems"): their attention kernels on the GEMM curve, with
// dropout on the probabilities; TP collectives beside their GEMMs (Megatron-Core's overlap,
// Megatron-LM's asynchronous input gradients) and in the activations' precision, read off what
// each described TP call carries; sends that hold the next computation; a gradient reduction
// after the backward; a parameter gather beside the next forward. Part of test_predict_features.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "platform/errors.hpp"
#include "predict/chunk_work.hpp"
#include "predict/key_costs.hpp"
#include "predict/kernel_costs.hpp"
#include "predict/machine_profile.hpp"
#include "predict/network_cost.hpp"
#include "predict/pipeline_sim.hpp"
#include "predict/step_sim.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;

// Attention as Megatron-LM runs it (batched_gemm): the two products over the full T*T scores,
// each one batched GEMM on the profile's bf16 curve, plus the softmax's pass over the scores (2
// bytes an element read and written) at the activation bandwidth; the backward four products and
// three passes (as modelled: a profile that gives a benchmark of these kernels makes it their floor,
// BatchedGemmAttentionIsNoFasterThanItsPublishedBenchmark). cuDNN's (cudnn): the causal half of the
// two products as one call on the curve,
// the backward 2.5 times its FLOPs. FlashAttention-2's (flash): the same, no faster than the
// profile's flash2_tflops (FA2's published ceiling on that GPU, below a large GEMM's rate), which
// binds at long sequences; on the curve alone for a profile without the figure. All against the
// costs written out here.
TEST(PredictFeatures, PublishedAttentionKernelsAreCostedFromTheProfile) {
  const auto a100 = profile("dgx-a100-80gb");
  const auto& r = a100.rates(true);
  ASSERT_TRUE(r.flash2_tflops.given()) << "the premise: the A100 profile gives FlashAttention-2's rates";
  const double b = 2, t = 2048, h = 12, hd = 128, scores = b * h * t * t, product = 2 * scores * hd;
  kformer::kernels::KernelCall c;
  c.family = kformer::kernels::Family::attention;
  c.bf16 = true;
  c.shape = {2, 2048, 12, 12, 128, 0};
  const double act = a100.memory_gbps.at("activation") * 1e3;  // bytes per us
  const auto with = [&](const kp::MachineProfile& p, kformer::AttentionModel m, bool backward) {
    c.backward = backward;
    return kp::kernel_us(p, c, kp::CallCosts(m));
  };
  const auto bg = kformer::AttentionModel::batched_gemm, fl = kformer::AttentionModel::flash,
             cu = kformer::AttentionModel::cudnn;
  kp::MachineProfile modelled = a100;  // the passes as modelled: without the profile's benchmark of them
  modelled.bf16.batched_gemm_tflops = {};
  EXPECT_NEAR(with(modelled, bg, false), 2 * curve_us(r, a100.launch_us, product) + a100.launch_us + 2 * 2 * scores / act,
              1e-6);
  EXPECT_NEAR(with(modelled, bg, true), 4 * curve_us(r, a100.launch_us, product) + a100.launch_us + 3 * 2 * scores / act,
              1e-6);
  const double fa2 = r.flash2_tflops.at(128, 2048) * 1e6;  // FLOPs per us, at this call's T
  EXPECT_NEAR(with(a100, cu, false), curve_us(r, a100.launch_us, product), 1e-6);
  EXPECT_NEAR(with(a100, cu, true), curve_us(r, a100.launch_us, 2.5 * product), 1e-6);
  for (bool backward : {false, true}) {
    const double flops = (backward ? 2.5 : 1.0) * product;
    EXPECT_NEAR(with(a100, fl, backward), std::max(curve_us(r, a100.launch_us, flops), a100.launch_us + flops / fa2), 1e-6);
  }
  // At T 8192 (torchtitan's Llama 3 8B) the ceiling binds: FA2 slower than cuDNN's on the curve.
  c.shape = {1, 8192, 32, 32, 128, 0};
  const double long_product = 2.0 * 32 * 8192.0 * 8192 * 128;
  EXPECT_NEAR(with(a100, fl, true), a100.launch_us + 2.5 * long_product / (r.flash2_tflops.at(128, 8192) * 1e6), 1e-6);
  EXPECT_GT(with(a100, fl, true), 1.05 * with(a100, cu, true));
  c.shape = {2, 2048, 12, 12, 128, 0};
  kp::MachineProfile unsaid = a100;
  unsaid.bf16.flash2_tflops = {};  // a profile that does not give FA2's rate: flash takes the curve
  EXPECT_EQ(with(unsaid, fl, false), with(a100, cu, false));
  EXPECT_EQ(with(unsaid, fl, true), with(a100, cu, true));
  // kformer's own kernel on this profile runs on the CUDA cores: far slower than any of them.
  const double own = with(a100, kformer::AttentionModel::kformer, false);
  std::cout << "bf16 attention, B 2, T 2048, 12 heads of 128 on a DGX A100: kformer's " << own / 1e3
            << " ms, Megatron-LM's batched GEMMs " << with(a100, bg, false) / 1e3 << " ms, FlashAttention-2 "
            << with(a100, fl, false) / 1e3 << " ms, cuDNN " << with(a100, cu, false) / 1e3 << " ms" << std::endl;
  EXPECT_GT(own, 5 * with(a100, bg, false));
}

// FlashAttention's Triton kernel (llm-foundry's MPT, attn_impl: triton): the causal half on the curve,
// no faster than the profile's triton_tflops, which the FA2 authors' A100 chart puts below FA2's bars
// (0.43-0.50 of them at head size 128): at T 2048 both ceilings bind and the kernel costs FA2's time
// times their ratio.
// Heads of 64 take the chart's head-64 bars.
// Every profile that gives both rates rates the Triton kernel below FA2 at every length.
TEST(PredictFeatures, TritonAttentionIsCostedAtItsPublishedRate) {
  const auto a100 = profile("dgx-a100-80gb");
  const auto& r = a100.rates(true);
  ASSERT_TRUE(r.triton_tflops.given()) << "the premise: the A100 profile gives the Triton kernel's rates";
  kformer::kernels::KernelCall c;
  c.family = kformer::kernels::Family::attention;
  c.bf16 = true;
  c.shape = {2, 2048, 12, 12, 128, 0};
  const double product = 2.0 * 2 * 12 * 2048.0 * 2048 * 128;
  const auto with = [&](kformer::AttentionModel m, bool backward) {
    c.backward = backward;
    return kp::kernel_us(a100, c, kp::CallCosts(m));
  };
  const auto tr = kformer::AttentionModel::triton, fl = kformer::AttentionModel::flash;
  for (bool backward : {false, true}) {
    const double flops = (backward ? 2.5 : 1.0) * product;
    EXPECT_NEAR(with(tr, backward), a100.launch_us + flops / (r.triton_tflops.at(128, 2048) * 1e6), 1e-6);
    EXPECT_NEAR((with(tr, backward) - a100.launch_us) / (with(fl, backward) - a100.launch_us),
                r.flash2_tflops.at(128, 2048) / r.triton_tflops.at(128, 2048), 1e-9);
  }
  c.shape = {2, 2048, 24, 24, 64, 0};  // the same width in heads of 64: the chart's head-64 bars
  EXPECT_NEAR(with(tr, false), a100.launch_us + product / (r.triton_tflops.at(64, 2048) * 1e6), 1e-6);
  EXPECT_NE(r.triton_tflops.at(64, 2048), r.triton_tflops.at(128, 2048));
  for (const char* name : {"dgx-a100-80gb", "perlmutter-a100-40gb", "h100-sxm-80gb", "h200-sxm-141gb"}) {
    const auto& q = profile(name).rates(true);
    ASSERT_TRUE(q.triton_tflops.given() && q.flash2_tflops.given()) << name;
    for (int hd : {64, 128})
      for (int t : {512, 1024, 2048, 4096, 8192, 16384})
        EXPECT_LT(q.triton_tflops.at(hd, t), q.flash2_tflops.at(hd, t)) << name << " hd " << hd << " T " << t;
  }
}

// cuDNN's flash attention on an H100 (Megatron-Core's, through Transformer Engine): at the
// Megatron-Core rows' shape (T 4096, 16 heads of 128) the GEMM curve would run it near a large GEMM's
// rate, above what its authors' benchmark measured (the profile's cudnn_forward_tflops and
// cudnn_backward_tflops, from Shah et al. 2024, for calls of their size; this one, a quarter of it, at
// the share the profile's half_rate_share gives): each pass takes its FLOPs at that ceiling. A small
// call stays on the curve, and a profile without the figures costs both passes on the curve alone.
TEST(PredictFeatures, CudnnAttentionIsNoFasterThanItsPublishedRate) {
  const auto h100 = profile("h100-sxm-80gb");
  const auto& r = h100.rates(true);
  ASSERT_TRUE(r.cudnn_forward_tflops.given()) << "the premise: the H100 profile gives cuDNN's rates";
  ASSERT_TRUE(r.cudnn_backward_tflops.given());
  const double fwd = r.cudnn_forward_tflops.at(4096), bwd = r.cudnn_backward_tflops.at(4096);
  kformer::kernels::KernelCall c;
  c.family = kformer::kernels::Family::attention;
  c.bf16 = true;
  const auto cudnn = [&](const kp::MachineProfile& p, bool backward) {
    c.backward = backward;
    return kp::kernel_us(p, c, kp::CallCosts(kformer::AttentionModel::cudnn));
  };
  const double L = h100.launch_us;
  c.shape = {1, 4096, 16, 16, 128, 0};
  const double product = 2.0 * 16 * 4096.0 * 4096 * 128;  // the causal half of both products
  // a quarter of the charts' work a call (16 heads of one 4096 sequence): below their rate (the next test)
  const double size = kp::attention_size_factor(r, 1, 16, 4096, 128);
  ASSERT_LT(size, 1) << "the premise: the H100 profile rates small calls below the charts";
  ASSERT_LT(curve_us(r, L, product), L + product / (fwd * size * 1e6)) << "the premise: the curve is faster";
  EXPECT_NEAR(cudnn(h100, false), L + product / (fwd * size * 1e6), 1e-6);
  EXPECT_NEAR(cudnn(h100, true), L + 2.5 * product / (bwd * size * 1e6), 1e-6);
  kp::MachineProfile unsaid = h100;
  unsaid.bf16.cudnn_forward_tflops = unsaid.bf16.cudnn_backward_tflops = {};
  EXPECT_NEAR(cudnn(unsaid, false), curve_us(r, L, product), 1e-6);
  EXPECT_NEAR(cudnn(unsaid, true), curve_us(r, L, 2.5 * product), 1e-6);
  std::cout << "cuDNN attention, T 4096, 16 heads of 128, on an H100: " << cudnn(h100, false) / 1e3 << " ms forward, "
            << cudnn(h100, true) / 1e3 << " ms backward (on the GEMM curve alone " << cudnn(unsaid, false) / 1e3
            << " and " << cudnn(unsaid, true) / 1e3 << ")" << std::endl;
  // Where the profile says nothing of small calls, a small one stays on the curve, below the ceiling
  // (with half_rate_share its own ceiling is lower still: the next test).
  kp::MachineProfile charted = h100;
  charted.bf16.attention_half_rate_share = 0;
  c.shape = {1, 512, 4, 4, 128, 0};  // 0.27 GFLOP
  const double small = 2.0 * 4 * 512.0 * 512 * 128;
  ASSERT_GT(curve_us(r, L, small), L + small / (r.cudnn_forward_tflops.at(512) * 1e6));
  EXPECT_NEAR(cudnn(charted, false), curve_us(r, L, small), 1e-6);
}

// The flash kernels' charted rates are for calls of 16k tokens at hidden 2048; a call with less work
// (TP-split heads of one sequence) leaves SMs idle: (1 + h) s / (s + h) of the rate at share s of that
// work, h the profile's half_rate_share (the H100's from the lent H200's timings of such calls, which
// the test attention_size_h100 holds it to). At the charts' size and above, and on a profile that does
// not say, the charted rate; a planted share without the call's head size would move the head-64 call.
TEST(PredictFeatures, AttentionCallsSmallerThanTheChartsRunBelowTheirRate) {
  const auto h100 = profile("h100-sxm-80gb");
  const auto& r = h100.rates(true);
  const double h = r.attention_half_rate_share;
  ASSERT_GT(h, 0) << "the premise: the H100 profile says it";
  EXPECT_DOUBLE_EQ(kp::attention_size_factor(r, 4, 16, 4096, 128), 1.0);  // the charts' own call
  EXPECT_DOUBLE_EQ(kp::attention_size_factor(r, 8, 64, 8192, 128), 1.0);  // larger: never above the chart
  EXPECT_NEAR(kp::attention_size_factor(r, 1, 16, 4096, 128), 0.25 * (1 + h) / (0.25 + h), 1e-12);
  EXPECT_NEAR(kp::attention_size_factor(r, 1, 32, 4096, 64), 0.25 * (1 + h) / (0.25 + h), 1e-12);
  // half the curve's height at share h, less for smaller calls
  const double at_h = kp::attention_size_factor(r, 1, 1, int(h * 2048 * 16384 / 128 + 0.5), 128);
  EXPECT_NEAR(at_h, (1 + h) / 2, 1e-4);
  EXPECT_LT(kp::attention_size_factor(r, 1, 8, 4096, 128), kp::attention_size_factor(r, 1, 16, 4096, 128));
  // FlashAttention-2 (predict.attention=flash), one sequence of 8 heads of 128 at T 4096, both passes
  const double product = 2.0 * 8 * 4096.0 * 4096 * 128, f = kp::attention_size_factor(r, 1, 8, 4096, 128);
  const double fa2 = r.flash2_tflops.at(128, 4096);
  EXPECT_NEAR(kp::system_attention_us(h100, true, kformer::AttentionModel::flash, 1, 4096, 8, 128, false),
              h100.launch_us + product / (fa2 * f * 1e6), 1e-6);
  kp::MachineProfile unsaid = h100;
  unsaid.bf16.attention_half_rate_share = 0;
  EXPECT_DOUBLE_EQ(kp::attention_size_factor(unsaid.rates(true), 1, 8, 4096, 128), 1.0);
  EXPECT_NEAR(kp::system_attention_us(unsaid, true, kformer::AttentionModel::flash, 1, 4096, 8, 128, false),
              h100.launch_us + product / (fa2 * 1e6), 1e-6);
}

// A batched product over a small head moves its T*T matrix for few FLOPs an element: at hd 64 in
// bf16 on an H100 each product takes that matrix's bytes at the copy bandwidth, not its FLOPs on
// the curve. kformer's own kernels.attention=batched_gemm keeps the scores and d(probabilities) in
// fp32: its QK^T writes 4 bytes a score, its softmax reads 4 and writes 2, where Megatron-LM's
// bf16 scores take 2 and 2 + 2 (the H200's -25% on the GPT-2 124M bf16 step became -11%).
TEST(PredictFeatures, AttentionProductsOverSmallHeadsTakeTheirMatricesBytes) {
  auto h100 = profile("h100-sxm-80gb");
  h100.bf16.batched_gemm_tflops = {};  // the passes as modelled (the benchmark's floor: the next test)
  const auto& r = h100.rates(true);
  const double b = 8, t = 1024, h = 12, hd = 64, scores = b * h * t * t, product = 2 * scores * hd;
  const double copy = h100.copy_gbps * 1e3, L = h100.launch_us;  // bytes per us
  ASSERT_GT(scores * 2 / copy, curve_us(r, 0, product)) << "the premise: bytes, not FLOPs, bound each product";
  kformer::kernels::KernelCall c;
  c.family = kformer::kernels::Family::attention;
  c.bf16 = true;
  c.shape = {8, 1024, 12, 12, 64, 0};
  const double megatron = kp::kernel_us(h100, c, kp::CallCosts(kformer::AttentionModel::batched_gemm));
  EXPECT_NEAR(megatron, 2 * (L + scores * 2 / copy) + kp::memory_us(h100, "activation", scores * 4, true), 1e-6);
  // kformer's own batched_gemm keeps its T*T matrices in the run's precision too: the same cost.
  const double own = kp::attention_us(h100, true, "batched_gemm", 8, 1024, 12, 12, 64, false);
  EXPECT_NEAR(own, megatron, 1e-6);
  c.backward = true;  // dP written in 2 bytes, three products reading 2, the softmax's 6
  const double own_bwd = kp::attention_us(h100, true, "batched_gemm", 8, 1024, 12, 12, 64, true);
  EXPECT_NEAR(own_bwd, 4 * (L + scores * 2 / copy) + kp::memory_us(h100, "activation", scores * 6, true), 1e-6);
  EXPECT_NEAR(kp::kernel_us(h100, c, kp::CallCosts(kformer::AttentionModel::batched_gemm)), own_bwd, 1e-6);
  // In fp32 every matrix is 4 bytes.
  c.bf16 = false, c.backward = false;
  const auto& r32 = h100.rates(false);
  const double one32 = L + std::max(curve_us(r32, 0, product), scores * 4 / copy);
  EXPECT_NEAR(kp::attention_us(h100, false, "batched_gemm", 8, 1024, 12, 12, 64, false),
              2 * one32 + kp::memory_us(h100, "activation", scores * 8, false), 1e-6);
}

// Megatron-LM's attention (batched GEMMs around a softmax) on an A100 as FlashAttention-2's authors
// timed the same kernels (the profile's batched_gemm_tflops: PyTorch's standard attention, forward and
// backward, without the causal mask): at their chart's own shapes (16k tokens, hidden 2048) a call
// takes what the chart says, about 1.8 times the modelled passes, forward and backward in the
// modelled proportion. Between head sizes a score's time is linear in hd, and past the largest too;
// dropout is a pass on top; a profile without the benchmark keeps the modelled passes.
TEST(PredictFeatures, BatchedGemmAttentionIsNoFasterThanItsPublishedBenchmark) {
  const auto a100 = profile("dgx-a100-80gb");
  const auto& bench = a100.bf16.batched_gemm_tflops;
  ASSERT_EQ(bench.size(), 2u) << "the premise: the A100 profile gives the chart's head sizes 64 and 128";
  kp::MachineProfile modelled = a100;
  modelled.bf16.batched_gemm_tflops = {};
  kformer::kernels::KernelCall c;
  c.family = kformer::kernels::Family::attention;
  c.bf16 = true;
  const auto bg = kformer::AttentionModel::batched_gemm;
  const auto both = [&](const kp::MachineProfile& p, double dropout = 0) {
    double us[2];
    for (bool backward : {false, true}) {
      c.backward = backward;
      us[backward] = kp::kernel_us(p, c, kp::CallCosts(bg, dropout));
    }
    return std::make_pair(us[0], us[1]);
  };
  // a score's time at head size hd from the chart's rate at T 2048 (14 hd FLOPs)
  const auto per_score = [&](int hd) { return 14.0 * hd / (bench.at(hd).at(2048) * 1e6); };
  for (int hd : {64, 128}) {
    const int h = 2048 / hd;
    c.shape = {8, 2048, h, h, hd, 0};
    const double scores = 8.0 * h * 2048 * 2048, chart = scores * per_score(hd);
    const auto [fwd, bwd] = both(a100);
    const auto [mf, mb] = both(modelled);
    ASSERT_GT(chart, 1.5 * (mf + mb)) << "the premise: the benchmark is well slower than the modelled passes";
    EXPECT_NEAR(fwd + bwd, chart, 1e-6 * chart) << hd;
    EXPECT_NEAR(fwd / bwd, mf / mb, 1e-12) << hd;
    std::cout << "batched-GEMM attention, B 8, T 2048, " << h << " heads of " << hd << " on a DGX A100: modelled "
              << (mf + mb) / 1e3 << " ms, as benchmarked " << (fwd + bwd) / 1e3 << " ms" << std::endl;
  }
  const auto call = [&](int hd) {
    c.shape = {8, 2048, 16, 16, hd, 0};
    const auto [fwd, bwd] = both(a100);
    return fwd + bwd;
  };
  const double scores = 8.0 * 16 * 2048 * 2048;
  EXPECT_NEAR(call(96), scores * (per_score(64) + per_score(128)) / 2, 1e-6 * call(96));
  EXPECT_NEAR(call(160), scores * (per_score(128) + (per_score(128) - per_score(64)) / 2), 1e-6 * call(160));
  EXPECT_NEAR(call(32), scores * per_score(64), 1e-6 * call(32));  // held below the smallest
  kp::MachineProfile one = a100;  // one head size given: its score's time at every head size
  one.bf16.batched_gemm_tflops.erase(64);
  EXPECT_NEAR(kp::measured_batched_us(one.bf16, scores, 2048, 64), scores * per_score(128), 1e-9 * scores);
  EXPECT_NEAR(kp::measured_batched_us(one.bf16, scores, 2048, 256), scores * per_score(128), 1e-9 * scores);
  kp::MachineProfile falling = a100;  // a score no cheaper past the largest head size than at it
  falling.bf16.batched_gemm_tflops[128].by_seq = {{2048, 500}};
  EXPECT_NEAR(kp::measured_batched_us(falling.bf16, scores, 2048, 256), scores * 14.0 * 128 / 500e6, 1e-9 * scores);
  c.shape = {8, 2048, 16, 16, 128, 0};
  const auto [f0, b0] = both(a100);
  const auto [f1, b1] = both(a100, 0.1);
  EXPECT_NEAR(f1 - f0, kp::memory_us(a100, "activation", scores * 5, true), 1e-6);
  EXPECT_NEAR(b1 - b0, kp::memory_us(a100, "activation", scores * 5, true), 1e-6);
}

// TP collectives beside their GEMMs (predict.tp_comm=overlapped, Megatron-Core's --tp-comm-overlap):
// on one stage at TP 2 whose forward is a 3 ms GEMM, its reduce-scatter (2 ms), a 0.5 ms kernel, an
// all-gather (2 ms), a norm (0.25 ms), the 1 ms GEMM that reads it and an all-reduce (2 ms): serialized
// every call holds the stream (10.75 ms); overlapped the reduce-scatter hides behind the GEMM before
// it, the all-gather shows only what outlasts the first GEMM after it (1 ms), the all-reduce stays
// whole (7.75 ms).
TEST(PredictFeatures, TpCollectivesOverlappedShowWhatOutlastsTheirGemm) {
  kp::MachineProfile p = slow_sends();
  for (const char* call : {"reduce_scatter", "allgather", "allreduce"}) p.intra_node.collectives[call] = {{2000, 0, 0}};
  p.inter_node = p.intra_node;
  const kp::NetworkCost net(p, {});
  const auto forward = [&](bool overlap) {
    kp::PipelineSetup s = one_stage_at_tp2();
    s.tp_overlap = overlap;
    kp::ChunkWork w;
    const auto tp = [](kformer::comm::OpKind op) { return kp::WorkItem{kp::ItemKind::tp_comm, "", 0, 1e3, 0, op}; };
    w.forward = {{kp::ItemKind::compute, "matmul_forward", 3000, 0, 0}, tp(kformer::comm::OpKind::reduce_scatter),
                 {kp::ItemKind::compute, "residual_forward", 500, 0, 0}, tp(kformer::comm::OpKind::allgather),
                 {kp::ItemKind::compute, "layernorm_forward", 250, 0, 0}, {kp::ItemKind::compute, "matmul_forward", 1000, 0, 0},
                 tp(kformer::comm::OpKind::allreduce)};
    w.backward = {{kp::ItemKind::compute, "b", 1, 0, 0}};
    s.chunks.push_back(w);
    return kp::simulate_pipeline(s, net, false)[0].forward_us;
  };
  const double serialized = forward(false), overlapped = forward(true);
  std::cout << "TP 2, a forward of 4.75 ms of kernels and three 2 ms calls: " << serialized / 1e3 << " ms serialized, "
            << overlapped / 1e3 << " ms with the calls beside their GEMMs" << std::endl;
  EXPECT_NEAR(serialized, 10750, 1e-6);
  EXPECT_NEAR(overlapped, 7750, 1e-6);
}

// Sends that hold the next computation (predict.pipeline_p2p=serialized): on 2 stages with 10 ms
// sends and 1 ms forwards, the first stage's second forward starts only once the first forward's
// send has ended, 10 ms after it was posted, where overlapped it starts at once (at 1 ms). The
// pipeline cannot end sooner for it (here it ends no later either: the sends of the steady state
// are on its critical path both ways).
TEST(PredictFeatures, SerializedSendsHoldTheNextComputation) {
  kp::MachineProfile p = slow_sends();
  p.one_stream = false;
  const kp::NetworkCost net(p, {});
  const auto wall = [&](bool serial) {
    kp::PipelineSetup s = two_stages(false);
    s.serial_p2p = serial;
    const auto st = kp::simulate_pipeline(s, net, true);
    double second_forward = -1;  // when stage 0's forward of micro-batch 1 began
    for (const auto& sp : st[0].spans)
      if (!sp.comm && sp.name == "forward" && sp.micro == 1) second_forward = sp.start_us;
    return std::make_pair(st[0].wall_us, second_forward);
  };
  const auto [overlapped, f1_overlapped] = wall(false);
  const auto [serialized, f1_serialized] = wall(true);
  std::cout << "2 stages, 10 ms sends: stage 0's second forward starts at " << f1_overlapped / 1e3 << " ms with "
            << "its sends in flight, " << f1_serialized / 1e3 << " ms held by them; its pipeline ends at "
            << overlapped / 1e3 << " and " << serialized / 1e3 << " ms" << std::endl;
  EXPECT_NEAR(f1_overlapped, 1000, 1e-6);
  EXPECT_NEAR(f1_serialized, 11000, 1e-6);
  EXPECT_GE(serialized, overlapped - 1e-6);
}

// ZeRO's parameter all-gather beside the next forward (predict.param_gather=overlapped, Megatron-
// Core's --overlap-param-gather): at dp=8 under ZeRO-1 in bf16 the step is shorter, by at most one
// micro-batch's forward of the stage (what it runs beside).
TEST(PredictFeatures, AParameterGatherBesideTheNextForwardHidesAtMostThatForward) {
  const auto a100 = profile("perlmutter-a100-40gb");
  const auto step = [&](const char* how) {
    return kp::predict_step(plan("gpt3-small.yaml", {"predict.world=8", "parallel.dp=8", "parallel.zero=1",
                                                     "train.precision=bf16", std::string("predict.param_gather=") + how}),
                            a100, false);
  };
  const kp::StepPrediction serialized = step("serialized"), overlapped = step("overlapped");
  const double forward_ms = serialized.rank0.forward_ms / plan("gpt3-small.yaml", {"parallel.dp=8"}).settings.parallel.microbatches;
  std::cout << "gpt3-small at dp=8, ZeRO-1, bf16: step " << serialized.step_ms << " ms with the parameter gather after "
            << "the step, " << overlapped.step_ms << " ms beside the next forward (" << forward_ms << " ms)" << std::endl;
  EXPECT_LT(overlapped.step_ms, serialized.step_ms);
  EXPECT_LE(serialized.step_ms - overlapped.step_ms, forward_ms + 1e-9);
}

namespace {
using kformer::comm::Payload;
std::vector<Payload> tp_payloads(const std::vector<kp::WorkItem>& items, kformer::comm::OpKind op) {
  std::vector<Payload> out;
  for (const auto& i : of_kind(items, kp::ItemKind::tp_comm))
    if (i.op == op) out.push_back(i.payload);
  return out;
}
}  // namespace

// What each TP call of the described step carries (comm::Payload, said at its call site), which
// predict.tp_precision and predict.tp_input_grad read: a middle chunk at TP 2 reduces its
// row-parallel outputs (activations) in the forward and its column-parallel layers' input
// gradients in the backward; under sequence parallelism its backward gathers the output
// gradients (activations) and the norms' outputs for the weight gradients, and reduce-scatters
// the input gradients; the last chunk's loss statistics carry neither.
TEST(PredictFeatures, DescribedTpCallsSayWhatTheyCarry) {
  using Op = kformer::comm::OpKind;
  const auto plain = middle_chunk("parallel.sequence_parallel=false");
  EXPECT_EQ(tp_payloads(plain.forward, Op::allreduce), std::vector<Payload>(2, Payload::activations));
  EXPECT_EQ(tp_payloads(plain.backward, Op::allreduce), std::vector<Payload>(2, Payload::input_gradient));
  const auto sp = middle_chunk("parallel.sequence_parallel=true");
  EXPECT_EQ(tp_payloads(sp.forward, Op::reduce_scatter), std::vector<Payload>(2, Payload::activations));
  EXPECT_EQ(tp_payloads(sp.backward, Op::reduce_scatter), std::vector<Payload>(2, Payload::input_gradient));
  const auto gathers = tp_payloads(sp.backward, Op::allgather);
  EXPECT_EQ(std::count(gathers.begin(), gathers.end(), Payload::weight_input), 2);
  EXPECT_EQ(std::count(gathers.begin(), gathers.end(), Payload::activations), 2);
  for (const auto& i : of_kind(sp.forward, kp::ItemKind::tp_comm)) EXPECT_NE(i.payload, Payload::other) << i.name;

  const kformer::RunPlan pl = plan("tiny.yaml", {"predict.world=8", "parallel.pp=4", "parallel.tp=2"});
  const kp::ChunkWork last = kp::chunk_work(profile("perlmutter-a100-40gb"), pl, 3);
  const auto stats = tp_payloads(last.forward, Op::allreduce);  // two blocks' outputs, then max and sums
  ASSERT_EQ(stats.size(), 2 * std::size_t(pl.chunks[3].second) + 2);
  EXPECT_EQ(stats[stats.size() - 2], Payload::other);
  EXPECT_EQ(stats.back(), Payload::other);
  EXPECT_EQ(tp_payloads(last.head_backward, Op::allreduce), std::vector<Payload>{Payload::input_gradient});
}

// predict.tp_precision=activations (Megatron-LM, DeepSpeed and PyTorch move a bf16 model's
// activations in bf16; kformer sums its partial products in fp32): in a bf16 run each fp32 TP
// all-reduce that carries activations (the blocks' outputs and input gradients) moves half the
// bytes; the loss statistics, and the pipeline message's gather, already bf16, the same; an fp32
// run is unchanged.
TEST(PredictFeatures, TpPrecisionHalvesABf16RunsActivationCollectives) {
  using Op = kformer::comm::OpKind;
  // The bytes of the last chunk's TP calls of kind `op` that carry activations (or, with
  // `other`, those that carry neither), over its forward, head and backward.
  const auto tp_bytes = [](const std::vector<std::string>& settings, Op op, bool other = false) {
    std::vector<std::string> o = {"predict.world=8", "parallel.pp=4", "parallel.tp=2"};
    o.insert(o.end(), settings.begin(), settings.end());
    const kp::ChunkWork w = kp::chunk_work(profile("perlmutter-a100-40gb"), plan("tiny.yaml", o), 3);
    double b = 0;
    for (const auto* list : {&w.forward, &w.head_backward, &w.backward})
      for (const auto& i : of_kind(*list, kp::ItemKind::tp_comm))
        if (i.op == op && (i.payload == Payload::other) == other) b += i.bytes;
    return b;
  };
  const std::vector<std::string> bf16 = {"train.precision=bf16"},
                                 halved = {"train.precision=bf16", "predict.tp_precision=activations"};
  EXPECT_GT(tp_bytes(bf16, Op::allreduce), 0);
  EXPECT_NEAR(tp_bytes(halved, Op::allreduce), tp_bytes(bf16, Op::allreduce) / 2, 1e-6);
  EXPECT_EQ(tp_bytes(halved, Op::allreduce, true), tp_bytes(bf16, Op::allreduce, true));  // max and sums
  EXPECT_GT(tp_bytes(bf16, Op::allreduce, true), 0);
  EXPECT_GT(tp_bytes(bf16, Op::allgather), 0);  // the received message's parts, in bf16 already
  EXPECT_EQ(tp_bytes(halved, Op::allgather), tp_bytes(bf16, Op::allgather));
  EXPECT_EQ(tp_bytes({"predict.tp_precision=activations"}, Op::allreduce), tp_bytes({}, Op::allreduce));
}

// predict.tp_input_grad=overlapped (Megatron-LM's asynchronous TP communication in the backward):
// on one stage at TP 2 with 3 ms collectives, a backward of a 4 ms GEMM running both products, its
// input gradient's all-reduce, a 0.25 ms norm, an all-gather of a weight input, a 1 ms GEMM of both
// products, an all-reduce of activations, a weight-only GEMM (zb-h1's W: 0.5 ms) and an input
// gradient's all-reduce after it. Serialized every call holds the stream (17.75 ms). Overlapped the
// first all-reduce shows what outlasts the first GEMM's weight half (3 - 2 ms), the gather what
// outlasts the next GEMM's input half (3 - 0.5 ms); the activations' all-reduce and the one after a
// GEMM without its input half stay whole (15.25 ms).
TEST(PredictFeatures, InputGradientCollectivesRunBesideTheOtherHalfOfTheirGemm) {
  kp::MachineProfile p = slow_sends();
  for (const char* call : {"allgather", "allreduce"}) p.intra_node.collectives[call] = {{3000, 0, 0}};
  p.inter_node = p.intra_node;
  const kp::NetworkCost net(p, {});
  const auto backward = [&](bool overlap) {
    kp::PipelineSetup s = one_stage_at_tp2();
    s.tp_input_grad = overlap;
    const auto tp = [](kformer::comm::OpKind op, Payload what) {
      return kp::WorkItem{kp::ItemKind::tp_comm, "", 0, 1e3, 0, op, what};
    };
    const auto gemm = [](double us, bool both) { return kp::WorkItem{kp::ItemKind::compute, "matmul_backward", us, 0, 0,
                                                                     kformer::comm::OpKind::allreduce, Payload::other,
                                                                     both ? us / 2 : 0}; };
    kp::ChunkWork w;
    w.forward = {{kp::ItemKind::compute, "f", 1, 0, 0}};
    w.backward = {gemm(4000, true), tp(kformer::comm::OpKind::allreduce, Payload::input_gradient),
                  {kp::ItemKind::compute, "layernorm_backward", 250, 0, 0},
                  tp(kformer::comm::OpKind::allgather, Payload::weight_input), gemm(1000, true),
                  tp(kformer::comm::OpKind::allreduce, Payload::activations), gemm(500, false),
                  tp(kformer::comm::OpKind::allreduce, Payload::input_gradient)};
    s.chunks.push_back(w);
    return kp::simulate_pipeline(s, net, false)[0].backward_us;
  };
  const double serialized = backward(false), overlapped = backward(true);
  std::cout << "TP 2, a backward of 5.75 ms of kernels and four 3 ms calls: " << serialized / 1e3
            << " ms serialized, " << overlapped / 1e3 << " ms with the input gradients' calls beside their GEMMs"
            << std::endl;
  EXPECT_NEAR(serialized, 17750, 1e-6);
  EXPECT_NEAR(overlapped, 15250, 1e-6);
}

// predict.attention_dropout (Megatron-LM's --attention-dropout, 0.1 by default): with batched_gemm
// attention a dropout pass over the T*T probabilities each way, reading them (bf16: 2 bytes),
// writing them and a 1-byte mask, at the activation bandwidth; nothing at 0, nothing for flash
// kernels (which drop inside the kernel) nor for kformer's own.
TEST(PredictFeatures, AttentionDropoutIsAPassOverTheProbabilitiesEachWay) {
  const auto a100 = profile("dgx-a100-80gb");
  kformer::kernels::KernelCall c;
  c.family = kformer::kernels::Family::attention;
  c.bf16 = true;
  c.shape = {2, 2048, 12, 12, 128, 0};
  const double scores = 2.0 * 12 * 2048 * 2048;
  const auto bg = kformer::AttentionModel::batched_gemm, fl = kformer::AttentionModel::flash;
  for (bool backward : {false, true}) {
    c.backward = backward;
    const double pass = kp::memory_us(a100, "activation", scores * 5, true);
    EXPECT_NEAR(kp::kernel_us(a100, c, kp::CallCosts(bg, 0.1)) - kp::kernel_us(a100, c, kp::CallCosts(bg)), pass, 1e-6);
    EXPECT_EQ(kp::kernel_us(a100, c, kp::CallCosts(bg, 0)), kp::kernel_us(a100, c, kp::CallCosts(bg)));
    EXPECT_EQ(kp::kernel_us(a100, c, kp::CallCosts(fl, 0.1)), kp::kernel_us(a100, c, kp::CallCosts(fl)));
    EXPECT_EQ(kp::kernel_us(a100, c, kp::CallCosts(kformer::AttentionModel::kformer, 0.1)), kp::kernel_us(a100, c));
  }
}

// Chunk 0 of tiny.yaml (2 layers) over 4 data-parallel ranks in bf16, under ZeRO-3 or not, with one
// more setting, on profile p.
static kp::ChunkWork tiny_dp4(const kp::MachineProfile& p, bool zero3, const std::string& setting) {
  std::vector<std::string> o = {"predict.world=4", "parallel.dp=4", "train.precision=bf16", "model.n_layers=2", setting};
  if (zero3) o.push_back("parallel.zero=3");
  return kp::chunk_work(p, plan("tiny.yaml", o), 0);
}

// predict.gather_copy=copy_out (the torchtitan preset): FSDP2 copies each all-gather's output into
// the parameters' own tensors on the compute stream, so a ZeRO-3 unit's miss costs its gathered
// bytes read and written once more at the profile's copy rate, written out here from its bytes;
// nothing else changes, and a deck without ZeRO-3 has no gather to copy.
TEST(PredictFeatures, AGatherCopiedOutCostsItsBytesTwiceOnTheComputeStream) {
  const auto a100 = profile("dgx-a100-80gb");
  const auto chunk = [&](bool zero3, const std::string& copy) { return tiny_dp4(a100, zero3, "predict.gather_copy=" + copy); };
  const kp::ChunkWork none = chunk(true, "none"), copied = chunk(true, "copy_out");
  const auto misses = [](const kp::ChunkWork& w) { return of_kind(w.forward, kp::ItemKind::require); };
  ASSERT_EQ(misses(none).size(), misses(copied).size());
  int gathered = 0;
  for (std::size_t k = 0; k < misses(none).size(); ++k) {
    const kp::WorkItem a = misses(none)[k], b = misses(copied)[k];
    EXPECT_EQ(a.bytes, b.bytes);
    const double pass = kp::memory_us(a100, a100.memory_gbps.count("copy") ? "copy" : "residual", 2 * a.bytes) *
                        a100.compute_scale;
    EXPECT_NEAR(b.us - a.us, a.bytes > 0 ? pass : 0.0, 1e-9 * (1 + pass));
    gathered += a.bytes > 0;
  }
  EXPECT_GT(gathered, 0);
  EXPECT_EQ(sum(copied.forward, kp::ItemKind::compute), sum(none.forward, kp::ItemKind::compute));
  EXPECT_EQ(sum(chunk(false, "copy_out").backward, kp::ItemKind::compute),
            sum(chunk(false, "none").backward, kp::ItemKind::compute));
}

// predict.scatter_copy=copy_in (the torchtitan preset): FSDP2 copies each unit's unsharded gradients
// (bf16 in a bf16 run) into its reduce-scatter's input (fp32, parallel.grad_reduce_dtype's default), so
// every reduce-scatter follows a compute item of its bytes plus half of them at the profile's copy rate,
// written out here from the call's bytes; nothing else changes, and a deck without ZeRO-3 has no
// reduce-scatter to copy into.
TEST(PredictFeatures, AUnitsGradientsCopiedInCostTheirBytesBeforeTheReduceScatter) {
  const auto a100 = profile("dgx-a100-80gb");
  const auto chunk = [&](bool zero3, const std::string& copy) { return tiny_dp4(a100, zero3, "predict.scatter_copy=" + copy); };
  const kp::ChunkWork none = chunk(true, "none"), copied = chunk(true, "copy_in");
  const auto& b = copied.backward_last;
  int scatters = 0;
  for (std::size_t k = 0; k < b.size(); ++k) {
    if (b[k].kind != kp::ItemKind::grad_scatter) continue;
    ASSERT_GT(k, 0u);
    const double pass = kp::memory_us(a100, a100.memory_gbps.count("copy") ? "copy" : "residual", 1.5 * b[k].bytes) *
                        a100.compute_scale;
    EXPECT_EQ(b[k - 1].name, "reduce_scatter_copy_in");
    EXPECT_NEAR(b[k - 1].us, pass, 1e-9 * (1 + pass));
    ++scatters;
  }
  EXPECT_GT(scatters, 0);
  EXPECT_EQ(of_kind(none.backward_last, kp::ItemKind::grad_scatter).size(), std::size_t(scatters));
  EXPECT_NEAR(sum(b, kp::ItemKind::compute) - sum(none.backward_last, kp::ItemKind::compute),
              [&] {
                double t = 0;
                for (const auto& i : b)
                  if (i.name == "reduce_scatter_copy_in") t += i.us;
                return t;
              }(),
              1e-6);
  EXPECT_EQ(sum(copied.forward, kp::ItemKind::compute), sum(none.forward, kp::ItemKind::compute));
  EXPECT_EQ(sum(chunk(false, "copy_in").backward_last, kp::ItemKind::compute),
            sum(chunk(false, "none").backward_last, kp::ItemKind::compute));
}
