// What each feature costs in a prediction (issue 26), read off the chunk lists predict walks
// (predict/chunk_work.hpp, the trainer's own calls described): bf16 GEMMs at the profile's bf16
// rate against fp32's; full recomputation adds one forward (its kernels and its TP calls) to the
// backward; sequence parallelism replaces each TP all-reduce of the forward by a reduce-scatter
// and an all-gather of the same bytes; a profile without bf16 rates refuses a bf16 deck; a group
// spread over nodes gets its share of the nodes' NICs (network_cost.hpp); on one stream a TP call
// waits for the sends before it; buckets at the non-blocking rate; bf16 ZeRO-1's gather of the
// bf16 copy after the optimizer. How the published systems ran: test_predict_systems.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "platform/errors.hpp"
#include "predict/chunk_work.hpp"
#include "predict/kernel_costs.hpp"
#include "predict/key_costs.hpp"
#include "predict/machine_profile.hpp"
#include "predict/network_cost.hpp"
#include "predict/pipeline_sim.hpp"
#include "predict/step_sim.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;

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
  // the host build's bf16 QKV writes fp32 (a convert rounds it after): the curve, of bf16 outputs
  // (gemm.output_bytes), and the 2 bytes more of each output element streamed
  const double wider_us = 2.0 * d.N() * d.qkv_width() / (kp::stream_gbps(a100) * 1e3);
  EXPECT_NEAR(g16[0].us, curve_us(a100.bf16, a100.launch_us, flops_qkv) + wider_us, 1e-9);
  const double ratio = (g32[0].us - a100.launch_us) / (g16[0].us - wider_us - a100.launch_us);
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

// train.recompute_layers=1 on chunks of two blocks: the backward re-runs one block's forward, half
// of what full recomputation of both adds, its TP calls included; the forward is unchanged.
TEST(PredictFeatures, RecomputeLayersReRunsOnlyTheFirstBlocks) {
  const auto a100 = profile("perlmutter-a100-40gb");
  const auto chunk = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> s = {"predict.world=4", "parallel.pp=2", "parallel.tp=2"};
    s.insert(s.end(), extra.begin(), extra.end());
    return kp::chunk_work(a100, plan("tiny.yaml", s), 0);
  };
  const kp::ChunkWork none = chunk({"train.recompute=none"}), full = chunk({"train.recompute=full"}),
                      one = chunk({"train.recompute=full", "train.recompute_layers=1"});
  const auto added = [&](const kp::ChunkWork& w) {
    return sum(w.backward, kp::ItemKind::compute) - sum(none.backward, kp::ItemKind::compute);
  };
  EXPECT_GT(added(full), 0);
  EXPECT_NEAR(added(one), added(full) / 2, 1e-9 * added(full));
  EXPECT_EQ(2 * (block_tp_calls(one.backward).size() - block_tp_calls(none.backward).size()),
            block_tp_calls(full.backward).size() - block_tp_calls(none.backward).size());
  EXPECT_EQ(sum(one.forward, kp::ItemKind::compute), sum(none.forward, kp::ItemKind::compute));
  // recompute_layers at or above the chunk's blocks is full recomputation
  EXPECT_EQ(sum(chunk({"train.recompute=full", "train.recompute_layers=2"}).backward, kp::ItemKind::compute),
            sum(full.backward, kp::ItemKind::compute));
}

// train.recompute=op (torchtitan's selective op policy): each block's backward is preceded by three
// forward GEMMs, K (N x KVl hd x C), the output projection (N x C x Hl hd) and up (N x Fl x C), at
// the profile's curve, and the output projection's TP all-reduce, one TP call a block where full
// recomputation re-runs two; the forward copies Q, V and the gate out of the packed outputs.
TEST(PredictFeatures, OpRecomputeReRunsKOutputAndUpProjections) {
  const auto a100 = profile("perlmutter-a100-40gb");
  const std::vector<std::string> llama = {"predict.world=4", "parallel.pp=2", "parallel.tp=2", "model.family=llama",
                                          "model.n_kv_heads=2"};
  const auto chunk = [&](const char* mode) {
    auto s = llama;
    s.push_back(std::string("train.recompute=") + mode);
    return kp::chunk_work(a100, plan("tiny.yaml", s), 0);
  };
  const kp::ChunkWork none = chunk("none"), op = chunk("op"), full = chunk("full");
  const auto named = [](const std::vector<kp::WorkItem>& items, const std::string& name) {
    std::vector<double> us;
    for (const auto& i : items)
      if (i.kind == kp::ItemKind::compute && i.name == name) us.push_back(i.us);
    std::sort(us.begin(), us.end());
    return us;
  };
  const auto d = plan("tiny.yaml", llama).dims;
  const int blocks = 2;
  std::vector<double> want;
  for (int b = 0; b < blocks; ++b)
    for (double n : {double(d.KVl) * d.hd, double(d.C), double(d.Fl)})
      want.push_back(curve_us(a100.fp32, a100.launch_us, 2.0 * d.N() * n * (n == d.C ? d.q_width() : d.C)));
  std::sort(want.begin(), want.end());
  const std::vector<double> got = named(op.backward, "matmul_forward");
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9 * want[i]);
  EXPECT_TRUE(named(none.backward, "matmul_forward").empty());
  EXPECT_EQ(block_tp_calls(op.backward).size() - block_tp_calls(none.backward).size(), std::size_t(blocks));
  EXPECT_EQ(block_tp_calls(full.backward).size() - block_tp_calls(none.backward).size(), std::size_t(2 * blocks));
  EXPECT_LT(sum(op.backward, kp::ItemKind::compute), sum(full.backward, kp::ItemKind::compute));
  EXPECT_EQ(named(op.forward, "copy_columns").size(), std::size_t(3 * blocks));
  EXPECT_TRUE(named(none.forward, "copy_columns").empty());
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

// What the data-parallel wrapper does to each fp32 gradient bucket before its reduction
// (predict.bucket_pass), once an iteration. Megatron-Core's NaN check reads 4 bytes a parameter (a
// reduction, at the residual rate where the profile measured none) and its `*= 1/dp` reads and
// writes 8 more where DP > 1, on the last micro-batch as the unit is done, before its bucket is
// posted (the unit_done item's time, which the pipeline simulation spends there or, delayed, after
// the pipeline: test_predict_systems.cpp). Megatron-LM 2022's `/= dp` reads and writes 8 bytes a
// parameter after the pipeline, before a serialized reduction: the step grows by exactly that.
// Written out from the unit's tensors and the rank's.
TEST(PredictFeatures, GradientBucketPassesCostTheirBytesOnceAnIteration) {
  const auto a100 = profile("perlmutter-a100-40gb");
  ASSERT_EQ(a100.memory_gbps.count("reduction"), 0u);
  const double rate = a100.memory_gbps.at("residual") * 1e3;  // bytes per us
  const std::vector<std::string> layout = {"parallel.pp=4", "parallel.tp=2", "train.global_batch=8", "train.micro_batch=1"};
  const auto chunk = [&](int dp, const std::string& pass, const std::string& more = "train.seed=1") {
    std::vector<std::string> o = layout;
    o.insert(o.end(), {"predict.world=" + std::to_string(8 * dp), "predict.bucket_pass=" + pass, more});
    return kp::chunk_work(a100, plan("tiny.yaml", o), 1);
  };
  const kformer::RunPlan pl = plan("tiny.yaml", {"predict.world=8", "parallel.pp=4", "parallel.tp=2"});
  double elements = 0;
  for (const auto& t : kformer::rank_params(pl.shape, pl.chunks, 4, 1))
    if (t.layer == 1) elements += double(t.local_size(2));
  const double norm = a100.launch_us + 4 * elements / rate, scale = a100.launch_us + 8 * elements / rate;
  for (const int dp : {1, 2}) {
    const kp::ChunkWork none = chunk(dp, "none"), checked = chunk(dp, "nan_check_scale"), scaled = chunk(dp, "scale");
    double passes = 0;  // each unit's pass is its unit_done item's time
    for (const auto& i : of_kind(checked.backward_last, kp::ItemKind::unit_done)) passes += i.us;
    EXPECT_NEAR(passes, a100.compute_scale * (norm + (dp > 1 ? scale : 0)), 1e-9 * passes);
    for (const auto* w : {&none, &scaled})  // scale is after the pipeline
      for (const auto& i : of_kind(w->backward_last, kp::ItemKind::unit_done)) EXPECT_EQ(i.us, 0);
    for (const auto& i : of_kind(checked.backward, kp::ItemKind::unit_done)) EXPECT_EQ(i.us, 0);  // not the last micro-batch
    EXPECT_EQ(sum(checked.backward_last, kp::ItemKind::compute), sum(none.backward_last, kp::ItemKind::compute));
  }
  // an fp16 run's 16-bit buffer (parallel.grad_reduce_dtype=bf16): half the bytes
  double half = 0;
  for (const auto& i : of_kind(chunk(2, "nan_check_scale", "parallel.grad_reduce_dtype=bf16").backward_last, kp::ItemKind::unit_done))
    half += i.us;
  EXPECT_NEAR(half, a100.compute_scale * (2 * a100.launch_us + 6 * elements / rate), 1e-9 * half);
  // scale: two identical data-parallel ranks, the reduction after the backward
  const auto step = [&](const std::string& pass) {
    return kp::predicted_step_ms(kformer::read_prediction_deck("predict", {kSource + "/input/tiny.yaml", "predict.world=2",
                                                                           "parallel.dp=2", "predict.grad_reduce=serialized",
                                                                           "predict.bucket_pass=" + pass}, false).settings,
                                 a100);
  };
  double whole = 0;
  for (const auto& t : kformer::rank_params(pl.shape, plan("tiny.yaml", {"predict.world=2", "parallel.dp=2"}).chunks, 1, 0))
    whole += double(t.local_size(1));
  EXPECT_NEAR(step("scale") - step("none"), a100.compute_scale * (a100.launch_us + 8 * whole / rate) / 1e3, 1e-9);
}

// The token embedding's gradient as PyTorch's F.embedding backward makes it (predict.embedding_grad):
// every micro-batch on the first chunk, a zeroed (Vl, C) gradient in the weights' type (at the
// profile's copy rate, the residual's where it measured none), and under Megatron's hook that
// gradient and the fp32 main_grad read and main_grad written (e + 8 bytes an element), before the
// embedding's unit is done; nothing on another chunk. Written out from the padded vocabulary.
TEST(PredictFeatures, ADenseEmbeddingGradientCostsTheWholeTableEachMicroBatch) {
  const auto a100 = profile("perlmutter-a100-40gb");
  const auto chunk = [&](const std::string& how, int c, const std::string& precision = "fp32") {
    return kp::chunk_work(a100, plan("tiny.yaml", {"predict.world=4", "parallel.pp=2", "parallel.tp=2",
                                                   "predict.embedding_grad=" + how, "train.precision=" + precision}),
                          c);
  };
  const kformer::RunPlan pl = plan("tiny.yaml", {"predict.world=4", "parallel.pp=2", "parallel.tp=2"});
  const double n = double(pl.shape.vocab_padded) / 2 * pl.shape.d_model;
  const auto rate = [&](const char* family) {  // bytes per us
    return (a100.memory_gbps.count(family) ? a100.memory_gbps.at(family) : a100.memory_gbps.at("residual")) * 1e3;
  };
  for (const std::string precision : {"fp32", "bf16"}) {
    const double e = precision == "bf16" ? 2 : 4;
    const kp::ChunkWork sparse = chunk("sparse", 0, precision), dense = chunk("dense", 0, precision),
                        main = chunk("dense_main_grad", 0, precision);
    const double zeros = a100.launch_us + e * n / rate("copy"), add = a100.launch_us + (e + 8) * n / rate("residual");
    for (std::vector<kp::WorkItem> kp::ChunkWork::*list : {&kp::ChunkWork::backward, &kp::ChunkWork::backward_last}) {
      const double base = sum(sparse.*list, kp::ItemKind::compute);
      EXPECT_NEAR(sum(dense.*list, kp::ItemKind::compute) - base, a100.compute_scale * zeros, 1e-9 * base) << precision;
      EXPECT_NEAR(sum(main.*list, kp::ItemKind::compute) - base, a100.compute_scale * (zeros + add), 1e-9 * base);
    }
    const auto& last = main.backward_last;
    const auto done = std::find_if(last.begin(), last.end(), [](const kp::WorkItem& i) {
      return i.kind == kp::ItemKind::unit_done && i.layer == -1;
    });
    ASSERT_NE(done, last.end());
    EXPECT_EQ(std::prev(done)->name, "embedding_dense_grad");
    EXPECT_EQ(sum(chunk("dense_main_grad", 1, precision).backward, kp::ItemKind::compute),
              sum(chunk("sparse", 1, precision).backward, kp::ItemKind::compute));  // the last chunk: no lookup
  }
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

// H100 nodes of 8 GPUs and 8 NICs, whose collectives NCCL runs: a ring all-gather or reduce-scatter
// takes N-1 steps, one a node boundary M-1 times, each adding NCCL's hop latency for the protocol its
// model picks (nccl_ring.hpp); all-reduce and a profile without NCCL keep one latency.
TEST(PredictFeatures, NcclRingsAddAHopLatencyAStep) {
  const auto p = profile("h100-sxm-80gb");
  ASSERT_TRUE(p.one_stream);
  ASSERT_EQ(p.devices_per_node, 8);
  const kp::NetworkCost net(p, {});
  const auto ag = kformer::comm::OpKind::allgather, rs = kformer::comm::OpKind::reduce_scatter;
  const double base = p.inter_node.fallback.latency_us;
  // An empty call: LL's hops, 0.47 us a step on NVLink (1.8 times that when the ring leaves the
  // node) and 2.7 us a step between nodes. 512 ranks on 64 nodes: 448 NVLink steps and 63 network ones.
  EXPECT_NEAR(net.real_us(ag, 0, {512, 1}), base + 448 * 0.47 * 1.8 + 63 * 2.7, 1e-9);
  EXPECT_NEAR(net.real_us(rs, 0, {128, 1}), base + 112 * 0.47 * 1.8 + 15 * 2.7, 1e-9);
  // 8 ranks inside one node: 7 NVLink steps, no 1.8.
  EXPECT_NEAR(net.real_us(ag, 0, {8, 1}), p.intra_node.fallback.latency_us + 7 * 0.47, 1e-9);
  // A large call: Simple's hops (3.4 and 9.6 us) and the whole bandwidth, the group's 8 nodes' NICs each.
  const double bytes = 40e9, bus = 511.0 / 512 * bytes;
  const double gbps = std::min(p.inter_node.fallback.bandwidth_gbps * 8, p.intra_node.fallback.bandwidth_gbps);
  EXPECT_NEAR(net.real_us(ag, bytes, {512, 1}), base + 448 * 3.4 + 63 * 9.6 + bus / (gbps * 125), 1e-6);
  // So the same call costs more on more ranks, where the bandwidth term alone barely moves.
  EXPECT_GT(net.real_us(ag, 100e6, {512, 1}) - net.real_us(ag, 100e6, {128, 1}), 500.0);
  // All-reduce (a tree at scale) keeps the link's one latency.
  const auto ar = kformer::comm::OpKind::allreduce;
  EXPECT_NEAR(net.real_us(ar, 0, {512, 1}), base, 1e-9);
  // So does a profile whose collectives are not NCCL's.
  auto mpi = p;
  mpi.one_stream = false;
  EXPECT_NEAR(kp::NetworkCost(mpi, {}).real_us(ag, 0, {512, 1}), base, 1e-9);
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

// predict.zero3_gather: one stage under ZeRO-3 over 2 ranks whose gathers take 2 ms each (any size),
// three units of 3 ms forward and 6 ms backward, a pool of one gathered unit (as FSDP reshards after
// the forward). Serialized (kformer's ParamStore) each miss blocks: 3 x (2 + 3) forward, 6 + 2 x (2 + 6)
// backward (the last unit stays gathered), 37 ms. Overlapped (FSDP's prefetch) each gather is issued
// as the unit before it begins, so only the first waits: 29 ms, 2 exposed. Gathers of 5 ms, longer
// than a forward unit, show what outlasts it: 2 ms at each later unit.
TEST(PredictFeatures, Zero3GathersOverlappedWaitOnlyForWhatOutlastsTheUnitBefore) {
  const auto setup = [](bool prefetch, double gather_us) { return zero3_stage(slow_sends(), prefetch, gather_us); };
  const kp::StageTimeline serial = setup(false, 2000), ahead = setup(true, 2000), long_gathers = setup(true, 5000);
  EXPECT_NEAR(serial.wall_us, 37000, 1e-6);
  EXPECT_NEAR(serial.exposed_us, 5 * 2000, 1e-6);  // 3 forward misses, 2 backward
  EXPECT_NEAR(ahead.wall_us, 29000, 1e-6);
  EXPECT_NEAR(ahead.exposed_us, 2000, 1e-6);
  EXPECT_NEAR(long_gathers.forward_us, 5000 + 3000 + 2 * (2000 + 3000), 1e-6);
  EXPECT_NEAR(long_gathers.exposed_us, 5000 + 2 * 2000, 1e-6);  // the backward's 6 ms units hide theirs
  // The key reaches the simulation: a ZeRO-3 deck on the A100 profile exposes less, never more.
  const auto a100 = profile("dgx-a100-80gb");
  const auto predicted = [&](const std::string& gather) {
    const kformer::RunPlan p = plan("tiny.yaml", {"predict.world=4", "parallel.dp=4", "parallel.zero=3",
                                                  "train.precision=bf16", "predict.zero3_gather=" + gather});
    return kp::predict_step(p, a100, false);
  };
  const kp::StepPrediction blocking = predicted("serialized"), prefetched = predicted("overlapped");
  EXPECT_LT(prefetched.rank0.comm_exposed_ms, blocking.rank0.comm_exposed_ms);
  EXPECT_LT(prefetched.step_ms, blocking.step_ms);
}
