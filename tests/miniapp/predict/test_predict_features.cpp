// What each feature costs in a prediction (issue 26), read off the chunk lists predict walks
// (predict/chunk_work.hpp, the trainer's own calls described): bf16 GEMMs at the profile's bf16
// rate against fp32's; full recomputation adds one forward (its kernels and its TP calls) to the
// backward; sequence parallelism replaces each TP all-reduce of the forward by a reduce-scatter
// and an all-gather of the same bytes; a profile without bf16 rates refuses a bf16 deck; a group
// spread over nodes gets its share of the nodes' NICs (network_cost.hpp); on one stream a TP call
// waits for the sends before it. And how the published systems ran (predict.attention,
// predict.pipeline_p2p, predict.grad_reduce): their attention kernels on the GEMM curve, sends
// that hold the next computation, a gradient reduction after the backward. And bf16 ZeRO-1's
// gather of the bf16 copy after the optimizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "platform/errors.hpp"
#include "predict/chunk_work.hpp"
#include "predict/kernel_costs.hpp"
#include "predict/machine_profile.hpp"
#include "parallel/pipeline_program.hpp"
#include "parallel/schedule.hpp"
#include "predict/network_cost.hpp"
#include "predict/pipeline_sim.hpp"
#include "predict/step_sim.hpp"
#include "settings/prediction_deck.hpp"
#include "train/make_plan.hpp"

namespace kp = kformer::predict;

namespace {

const std::string kSource = KFORMER_SOURCE_DIR;

kp::MachineProfile profile(const std::string& name) {
  return kp::load_profile(kSource + "/input/machines/" + name + ".yaml");
}

kformer::RunPlan plan(const std::string& file, std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), kSource + "/input/" + file);
  return kformer::make_plan(kformer::read_prediction_deck("predict", overrides, false).settings);
}

double sum(const std::vector<kp::WorkItem>& items, kp::ItemKind kind) {
  double t = 0;
  for (const auto& i : items)
    if (i.kind == kind) t += kind == kp::ItemKind::compute ? i.us : i.bytes;
  return t;
}

std::vector<kp::WorkItem> of_kind(const std::vector<kp::WorkItem>& items, kp::ItemKind kind) {
  std::vector<kp::WorkItem> out;
  for (const auto& i : items)
    if (i.kind == kind) out.push_back(i);
  return out;
}

// The TP calls of a block's forward or backward without sequence parallelism: all-reduces. The
// chunk's work also holds the TP all-gather of the pipeline message it received (its 1/tp parts,
// BlockDims::splits_messages), which belongs to the chunk, not the block: left out.
std::vector<kp::WorkItem> block_tp_calls(const std::vector<kp::WorkItem>& items) {
  std::vector<kp::WorkItem> out;
  for (const auto& i : items)
    if (i.kind == kp::ItemKind::tp_comm && i.op != kformer::comm::OpKind::allgather) out.push_back(i);
  return out;
}
double bytes_of(const std::vector<kp::WorkItem>& items) {
  double b = 0;
  for (const auto& i : items) b += i.bytes;
  return b;
}

// Chunk 1 of tiny.yaml on 4 stages of one layer each at tp=2, with one more setting, on the A100
// profile: a middle chunk, whose forward is one block's forward alone (and its input's gather).
kp::ChunkWork middle_chunk(const std::string& setting) {
  return kp::chunk_work(profile("perlmutter-a100-40gb"),
                        plan("tiny.yaml", {"predict.world=8", "parallel.pp=4", "parallel.tp=2", setting}), 1);
}

// The profile's GEMM time for a forward GEMM of `flops` in one precision, written out here from
// the curve's definition (machine_profile.hpp), not through kernel_costs.
double curve_us(const kp::ComputeRates& r, double launch_us, double flops) {
  const double eff = r.gemm_max_efficiency * flops / (flops + r.gemm_half_efficiency_gflop * 1e9);
  return launch_us + flops / (r.gemm_peak_tflops * eff * 1e6);
}

// The A100 profile with every pipeline send taking 10 ms, whatever its size, and nothing else
// costing time on the network.
kp::MachineProfile slow_sends() {
  kp::MachineProfile p = profile("perlmutter-a100-40gb");
  p.intra_node = {};
  p.intra_node.fallback = {0, 0, 0};
  p.intra_node.collectives["send"] = {{10000, 0, 0}};
  p.inter_node = p.intra_node;
  return p;
}

// 1F1B over 2 stages of one chunk each, 4 micro-batches: forwards of 1 ms (then, with tp_call, one
// TP all-reduce on 2 ranks), backwards of 2 ms.
kp::PipelineSetup two_stages(bool tp_call) {
  kp::PipelineSetup s;
  s.pp = 2, s.n_chunks = 2, s.microbatches = 4;
  const kformer::Schedule sched = kformer::make_schedule(kformer::ScheduleKind::one_f_one_b, 2, 4, 1);
  for (int r = 0; r < 2; ++r) s.programs.push_back(kformer::comm_program(sched[r], 2, 2));
  s.gather_bytes.assign(2, {}), s.bucket_bytes.assign(2, {});
  s.tp = {tp_call ? 2 : 1, 1}, s.pp_group = {2, 1};
  s.message_bytes = 1e6;
  for (int c = 0; c < 2; ++c) {
    kp::ChunkWork w;
    w.forward = {{kp::ItemKind::compute, "f", 1000, 0, 0}};
    if (tp_call) w.forward.push_back({kp::ItemKind::tp_comm, "allreduce", 0, 1e3, 0});
    w.backward = {{kp::ItemKind::compute, "b", 2000, 0, 0}};
    s.chunks.push_back(w);
  }
  return s;
}

// One stage of one chunk at TP 2, one micro-batch: its chunk's work left to the test.
kp::PipelineSetup one_stage_at_tp2() {
  kp::PipelineSetup s;
  s.pp = 1, s.n_chunks = 1, s.microbatches = 1;
  const kformer::Schedule sched = kformer::make_schedule(kformer::ScheduleKind::one_f_one_b, 1, 1, 1);
  s.programs.push_back(kformer::comm_program(sched[0], 1, 1));
  s.gather_bytes.assign(1, {}), s.bucket_bytes.assign(1, {});
  s.tp = {2, 1}, s.pp_group = {1, 1};
  return s;
}

}  // namespace

TEST(PredictFeatures, Bf16GemmsTakeTheProfilesBf16Rate) {
  const auto a100 = profile("perlmutter-a100-40gb");
  const std::vector<std::string> layout = {"predict.world=4", "parallel.tp=4"};
  auto with = [&](const char* precision) {
    auto o = layout;
    o.push_back(std::string("train.precision=") + precision);
    return kp::chunk_work(a100, plan("gpt3-small.yaml", o), 0);
  };
  const kp::ChunkWork f32 = with("fp32"), b16 = with("bf16");
  // The same GEMM calls in the same order; each at its precision's curve.
  std::vector<kp::WorkItem> g32, g16;
  for (const auto& i : f32.forward)
    if (i.name.rfind("matmul", 0) == 0) g32.push_back(i);
  for (const auto& i : b16.forward)
    if (i.name.rfind("matmul", 0) == 0) g16.push_back(i);
  ASSERT_EQ(g32.size(), g16.size());
  ASSERT_GE(g32.size(), 4u * 12);  // four GEMMs per block, 12 blocks
  const auto d = plan("gpt3-small.yaml", layout).dims;
  const double flops_qkv = 2.0 * d.N() * d.qkv_width() * d.C;  // the first GEMM of each block
  EXPECT_NEAR(g32[0].us, curve_us(a100.fp32, a100.launch_us, flops_qkv), 1e-9);
  EXPECT_NEAR(g16[0].us, curve_us(a100.bf16, a100.launch_us, flops_qkv), 1e-9);
  const double ratio = (g32[0].us - a100.launch_us) / (g16[0].us - a100.launch_us);
  std::cout << "gpt3-small tp=4 QKV GEMM on " << a100.name << ": fp32 " << g32[0].us << " us, bf16 " << g16[0].us
            << " us (" << ratio << "x)" << std::endl;
  EXPECT_GT(ratio, 5.0);  // tensor cores: 312 against 19.5 TFLOP/s peak, less at this size
  // The memory-bound kernels move half the bytes of the activations they read and write in bf16.
  EXPECT_LT(sum(b16.forward, kp::ItemKind::compute), sum(f32.forward, kp::ItemKind::compute));
}

// A bf16 memory-bound call takes the profile's bf16 rate of its family where calibrate measured
// one (on an H100 the streaming kernels move half the GB/s on bf16 activations), the fp32 rate
// otherwise; fp32 calls never take it.
TEST(PredictFeatures, Bf16MemoryBoundCallsTakeTheBf16RateWhereGiven) {
  auto a100 = profile("perlmutter-a100-40gb");
  const auto norms = [&](const kp::MachineProfile& p, const char* precision) {
    double us = 0;
    for (const auto& i : kp::chunk_work(p, plan("gpt3-small.yaml", {std::string("train.precision=") + precision}), 0).forward)
      if (i.name.rfind("layernorm", 0) == 0) us += i.us - p.launch_us;
    return us;
  };
  const double f32 = norms(a100, "fp32"), b16 = norms(a100, "bf16");
  ASSERT_GT(b16, 0);
  auto slow = a100;
  slow.bf16.memory_gbps["norm"] = a100.memory_gbps.at("norm") / 2;  // half the GB/s on bf16
  EXPECT_NEAR(norms(slow, "bf16"), 2 * b16, 1e-9 * b16);
  EXPECT_NEAR(norms(slow, "fp32"), f32, 1e-9 * f32);
  slow.bf16.memory_gbps.erase("norm");  // a family without a bf16 rate: the fp32 one
  EXPECT_NEAR(norms(slow, "bf16"), b16, 1e-9 * b16);
}

TEST(PredictFeatures, AProfileWithoutBf16RatesRefusesABf16Deck) {
  const auto v100 = profile("v100-16gb-10gbe");
  EXPECT_NO_THROW(kp::chunk_work(v100, plan("tiny.yaml", {}), 0));
  try {
    kp::chunk_work(v100, plan("tiny.yaml", {"train.precision=bf16"}), 0);
    ADD_FAILURE() << "a bf16 deck was costed on a profile without bf16 rates";
  } catch (const kformer::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no bf16 rates"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(PredictFeatures, FullRecomputeAddsOneForwardToTheBackward) {
  const kp::ChunkWork none = middle_chunk("train.recompute=none"), full = middle_chunk("train.recompute=full");
  const double fwd = sum(none.forward, kp::ItemKind::compute);
  EXPECT_NEAR(sum(full.backward, kp::ItemKind::compute) - sum(none.backward, kp::ItemKind::compute), fwd, 1e-9 * fwd);
  EXPECT_EQ(block_tp_calls(full.backward).size(), block_tp_calls(none.backward).size() + block_tp_calls(none.forward).size());
  EXPECT_NEAR(bytes_of(block_tp_calls(full.backward)) - bytes_of(block_tp_calls(none.backward)),
              bytes_of(block_tp_calls(none.forward)), 1e-9);
  EXPECT_EQ(sum(full.forward, kp::ItemKind::compute), fwd);  // the forward itself is unchanged
}

// A pass over the chunk's gradients after each micro-batch's backward (predict.grad_accumulate):
// DeepSpeed's BF16_Optimizer widens each bf16 gradient (2 bytes read, 4 written) and adds it to
// the fp32 one (8 read, 4 written), two calls per tensor; autograd's accumulation in bf16 reads 4
// and writes 2 bytes, one call. Written out here from the layer's tensors (12 C^2 / tp weights, 7 C
// / tp split biases, 6 C replicated norm and bias elements at C 64, tp 2) at the profile's residual
// rate; the forward is unchanged, and under zb-h1 the pass follows W, not B.
TEST(PredictFeatures, GradientAccumulationPassesCostTheirBytes) {
  const auto a100 = profile("perlmutter-a100-40gb");
  const kformer::RunPlan pl = plan("tiny.yaml", {"predict.world=8", "parallel.pp=4", "parallel.tp=2"});
  double elements = 0, tensors = 0;
  for (const auto& t : kformer::rank_params(pl.shape, pl.chunks, 4, 1))
    if (t.layer == 1) elements += double(t.local_size(2)), tensors += 1;
  const double C = 64, tp = 2, rate = a100.memory_gbps.at("residual") * 1e3;  // bytes per us
  EXPECT_EQ(elements, 12 * C * C / tp + 7 * C / tp + 6 * C);
  const kp::ChunkWork fused = middle_chunk("predict.grad_accumulate=fused"),
                      fp32 = middle_chunk("predict.grad_accumulate=fp32_pass"),
                      lp = middle_chunk("predict.grad_accumulate=lp_pass");
  const double base = sum(fused.backward, kp::ItemKind::compute);
  EXPECT_NEAR(sum(fp32.backward, kp::ItemKind::compute) - base, 2 * tensors * a100.launch_us + 18 * elements / rate,
              1e-9 * base);
  EXPECT_NEAR(sum(lp.backward, kp::ItemKind::compute) - base, tensors * a100.launch_us + 6 * elements / rate,
              1e-9 * base);
  EXPECT_EQ(sum(fp32.forward, kp::ItemKind::compute), sum(fused.forward, kp::ItemKind::compute));
  const kp::ChunkWork zb = middle_chunk("parallel.schedule=zb-h1"),
                      zb_fp32 = kp::chunk_work(a100, plan("tiny.yaml", {"predict.world=8", "parallel.pp=4",
                                                                        "parallel.tp=2", "parallel.schedule=zb-h1",
                                                                        "predict.grad_accumulate=fp32_pass"}), 1);
  EXPECT_EQ(sum(zb_fp32.backward, kp::ItemKind::compute), sum(zb.backward, kp::ItemKind::compute));
  EXPECT_NEAR(sum(zb_fp32.weight, kp::ItemKind::compute) - sum(zb.weight, kp::ItemKind::compute),
              2 * tensors * a100.launch_us + 18 * elements / rate, 1e-9 * base);
}

TEST(PredictFeatures, SequenceParallelismSplitsEachAllReduceInTwo) {
  const auto plain = block_tp_calls(middle_chunk("parallel.sequence_parallel=false").forward);
  const auto sp = of_kind(middle_chunk("parallel.sequence_parallel=true").forward, kp::ItemKind::tp_comm);
  ASSERT_EQ(plain.size(), 2u);  // after the attention's and the MLP's row-parallel projections
  ASSERT_EQ(sp.size(), 2 * plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].op, kformer::comm::OpKind::allreduce);
    // An all-gather before the column-parallel projection, a reduce-scatter after the row-parallel one.
    EXPECT_EQ(sp[2 * i].op, kformer::comm::OpKind::allgather);
    EXPECT_EQ(sp[2 * i + 1].op, kformer::comm::OpKind::reduce_scatter);
    EXPECT_EQ(sp[2 * i].bytes, plain[i].bytes);
    EXPECT_EQ(sp[2 * i + 1].bytes, plain[i].bytes);
  }
}

// Perlmutter's profile: 4 GPUs and 4 NICs per node, one NIC reaching 160 Gbit/s, NVLink 1800.
TEST(PredictFeatures, AGroupAcrossNodesSharesTheNodesNics) {
  const auto p = profile("perlmutter-a100-40gb");
  ASSERT_EQ(p.devices_per_node, 4);
  ASSERT_EQ(p.nics_per_node, 4);
  const kp::NetworkCost net(p, {});
  const double bytes = 64e6, n16 = 2.0 * 15 / 16 * bytes, n4 = 2.0 * 3 / 4 * bytes;  // all-reduce bus bytes
  const auto ar = kformer::comm::OpKind::allreduce;
  const double nic = p.inter_node.fallback.bandwidth_gbps * 125, lat = p.inter_node.fallback.latency_us;
  // 16 consecutive ranks: 4 nodes, 4 members on each, whose 4 NICs the group has to itself.
  EXPECT_NEAR(net.real_us(ar, bytes, {16, 1}), lat + n16 / (4 * nic), 1e-6);
  // 4 ranks 4 apart (data parallel under tp=4): one member per node, so a quarter of the node's
  // NICs (the other three TP ranks' groups use the rest): one NIC.
  EXPECT_NEAR(net.real_us(ar, bytes, {4, 4}), lat + n4 / nic, 1e-6);
  // Not what 16 ranks inside one node would cost (NVLink for all of it).
  auto one_node = p;
  one_node.devices_per_node = 16;
  const kp::NetworkCost inside(one_node, {});
  const double nvlink = p.intra_node.fallback.bandwidth_gbps * 125;
  EXPECT_NEAR(inside.real_us(ar, bytes, {16, 1}), p.intra_node.fallback.latency_us + n16 / nvlink, 1e-6);
  EXPECT_GT(net.real_us(ar, bytes, {16, 1}), 2 * inside.real_us(ar, bytes, {16, 1}));
  // Polaris: 2 NICs for 4 GPUs, so a group with one member per node gets half a NIC.
  const auto polaris = profile("polaris-a100-40gb");
  const kp::NetworkCost pol(polaris, {});
  EXPECT_NEAR(pol.real_us(ar, bytes, {4, 4}),
              polaris.inter_node.fallback.latency_us + n4 / (0.5 * polaris.inter_node.fallback.bandwidth_gbps * 125), 1e-6);
}

// NCCL's one stream per rank: a TP call waits for the pipeline sends posted before it. On 2 stages
// with a slow send (10 ms) and one TP all-reduce per forward, the first stage's second forward
// (after the send of the first one's activation) waits for that send in its TP call, where the
// profile says the calls share one stream: its forward time grows by the send's 10 ms less the
// millisecond of compute before the call.
TEST(PredictFeatures, OneStreamQueuesATpCallBehindTheSendsBeforeIt) {
  kp::MachineProfile p = slow_sends();
  const auto predict = [&](bool one_stream) {
    p.one_stream = one_stream;
    const kp::NetworkCost net(p, {});
    kp::PipelineSetup s = two_stages(true);
    s.one_stream = one_stream;
    return kp::simulate_pipeline(s, net, false)[0].forward_us;
  };
  const double overlapped = predict(false), queued = predict(true);
  std::cout << "2 stages, 10 ms sends: the first stage's forward takes " << overlapped / 1e3
            << " ms with its TP calls beside the sends, " << queued / 1e3 << " ms queued behind them" << std::endl;
  EXPECT_NEAR(queued - overlapped, 9000, 1e-6);
}

// Attention as Megatron-LM runs it (batched_gemm): the two products over the full T*T scores,
// each one batched GEMM on the profile's bf16 curve, plus the softmax's pass over the scores (2
// bytes an element read and written) at the activation bandwidth; the backward four products and
// three passes. FlashAttention's (flash): the causal half of the two products as one call on the
// curve, the backward 2.5 times its FLOPs. Both against the curve written out here.
TEST(PredictFeatures, PublishedAttentionKernelsAreGemmsOnTheCurve) {
  const auto a100 = profile("dgx-a100-80gb");
  const auto& r = a100.rates(true);
  const double b = 2, t = 2048, h = 12, hd = 128, scores = b * h * t * t, product = 2 * scores * hd;
  kformer::kernels::KernelCall c;
  c.family = kformer::kernels::Family::attention;
  c.bf16 = true;
  c.shape = {2, 2048, 12, 12, 128, 0};
  const double act = a100.memory_gbps.at("activation") * 1e3;  // bytes per us
  const auto with = [&](kformer::AttentionModel m, bool backward) {
    c.backward = backward;
    return kp::kernel_us(a100, c, kp::CallCosts(m));
  };
  const auto bg = kformer::AttentionModel::batched_gemm, fl = kformer::AttentionModel::flash;
  EXPECT_NEAR(with(bg, false), 2 * curve_us(r, a100.launch_us, product) + a100.launch_us + 2 * 2 * scores / act, 1e-6);
  EXPECT_NEAR(with(bg, true), 4 * curve_us(r, a100.launch_us, product) + a100.launch_us + 3 * 2 * scores / act, 1e-6);
  EXPECT_NEAR(with(fl, false), curve_us(r, a100.launch_us, product), 1e-6);
  EXPECT_NEAR(with(fl, true), curve_us(r, a100.launch_us, 2.5 * product), 1e-6);
  // kformer's own kernel on this profile runs on the CUDA cores: far slower than either.
  const double own = with(kformer::AttentionModel::kformer, false);
  std::cout << "bf16 attention, B 2, T 2048, 12 heads of 128 on a DGX A100: kformer's " << own / 1e3
            << " ms, Megatron-LM's batched GEMMs " << with(bg, false) / 1e3 << " ms, flash "
            << with(fl, false) / 1e3 << " ms" << std::endl;
  EXPECT_GT(own, 5 * with(bg, false));
}

// A batched product over a small head moves its T*T matrix for few FLOPs an element: at hd 64 in
// bf16 on an H100 each product takes that matrix's bytes at the copy bandwidth, not its FLOPs on
// the curve. kformer's own kernels.attention=batched_gemm keeps the scores and d(probabilities) in
// fp32: its QK^T writes 4 bytes a score, its softmax reads 4 and writes 2, where Megatron-LM's
// bf16 scores take 2 and 2 + 2 (the H200's -25% on the GPT-2 124M bf16 step became -11%).
TEST(PredictFeatures, AttentionProductsOverSmallHeadsTakeTheirMatricesBytes) {
  const auto h100 = profile("h100-sxm-80gb");
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

// The gradient reduction after the backward (predict.grad_reduce=serialized): at dp=8 on a GPU
// profile, whose NCCL reduces buckets while the last backward runs, the step takes longer, by at
// most the reduction's whole time (the fp32 gradients' all-reduce, and a latency per bucket, one
// per unit: the blocks, the embedding and the head), which is all overlapped could have hidden.
TEST(PredictFeatures, AGradientReductionAfterTheBackwardHidesNothing) {
  const auto a100 = profile("perlmutter-a100-40gb");
  const auto step = [&](const char* when) {
    return kp::predict_step(plan("gpt3-small.yaml", {"predict.world=8", "parallel.dp=8", "train.precision=bf16",
                                                     std::string("predict.grad_reduce=") + when}),
                            a100, false)
        .step_ms;
  };
  const double overlapped = step("overlapped"), serialized = step("serialized");
  const kp::NetworkCost net(a100, {});
  const kformer::RunPlan pl = plan("gpt3-small.yaml", {"predict.world=8", "parallel.dp=8"});  // fp32, ZeRO 0
  const double params = pl.memory.params / 4, buckets = pl.settings.model.n_layers + 2;
  const auto ar = kformer::comm::OpKind::allreduce;
  const double reduce_ms = (net.real_us(ar, 4 * params, {8, 1}) + buckets * net.real_us(ar, 0, {8, 1})) / 1e3;
  std::cout << "gpt3-small at dp=8 in bf16: step " << overlapped << " ms with the reduction beside the backward, "
            << serialized << " ms after it (the reduction alone " << reduce_ms << " ms)" << std::endl;
  EXPECT_GT(serialized, overlapped);
  EXPECT_LE(serialized - overlapped, reduce_ms);
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

// The data-parallel buckets at the profile's non-blocking rate (iallreduce, which calibrate fits
// to calls posted together and waited for at once, as GradSync posts them): on a profile whose
// network does not progress on its own, every bucket moves after the backward, so a non-blocking
// all-reduce 4 times slower than the blocking one adds, over the fp32 gradients' 4 P bytes (bus
// factor 1 at 2 ranks), 4P / bandwidth * (4 - 1) to the step, and nothing where the profile has no
// non-blocking figures.
TEST(PredictFeatures, BucketsTakeTheNonBlockingRate) {
  kp::MachineProfile p = profile("perlmutter-a100-40gb");
  p.async_progress = false;
  const double gbps = 100;
  p.intra_node.collectives["allreduce"] = {{5, gbps, 2}};
  p.inter_node = p.intra_node;
  const kformer::RunPlan pl = plan("gpt3-small.yaml", {"predict.world=2", "parallel.dp=2"});  // fp32, ZeRO 0
  const double blocking = kp::predict_step(pl, p, false).step_ms;
  p.intra_node.collectives["iallreduce"] = {{5, gbps / 4, 2}};
  p.inter_node = p.intra_node;
  const double posted = kp::predict_step(pl, p, false).step_ms;
  const double expected_ms = 4 * pl.memory.params / 4 / (gbps * 125) * 3 / 1e3;
  std::cout << "gpt3-small at dp=2: step " << blocking << " ms with buckets at the blocking rate, " << posted
            << " ms at a non-blocking rate 4x slower (expected +" << expected_ms << " ms)" << std::endl;
  EXPECT_NEAR(posted - blocking, expected_ms, 1e-6 * expected_ms);
}

// ZeRO-1's gather of the updated weights after the optimizer: of the fp32 values in fp32, of the
// bf16 copy in bf16 (ParamStore::masters_sharded). With every other call free, a slow all-gather
// adds to the bf16 step half of what it adds to the fp32 one.
TEST(PredictFeatures, Bf16ZeroOneGathersTheBf16Copy) {
  const auto added_ms = [](const char* precision) {
    kp::MachineProfile p = profile("perlmutter-a100-40gb");
    p.intra_node = {};
    p.intra_node.fallback = {0, 0, 0};
    const kformer::RunPlan pl = plan("gpt3-small.yaml", {"predict.world=2", "parallel.dp=2", "parallel.zero=1",
                                                         std::string("train.precision=") + precision});
    p.inter_node = p.intra_node;
    const double free = kp::predict_step(pl, p, false).step_ms;
    p.intra_node.collectives["allgather"] = {{0, 1, 2}};  // 1 Gbit/s
    p.inter_node = p.intra_node;
    return kp::predict_step(pl, p, false).step_ms - free;
  };
  const double fp32 = added_ms("fp32"), bf16 = added_ms("bf16");
  std::cout << "gpt3-small at dp=2 zero=1: a 1 Gbit/s all-gather adds " << fp32 << " ms in fp32, " << bf16
            << " ms in bf16" << std::endl;
  EXPECT_GT(fp32, 100);
  EXPECT_NEAR(bf16 / fp32, 0.5, 1e-6);
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
