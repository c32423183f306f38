// What a collective in flight costs the compute beside it (issue 37): NCCL runs a collective as one
// CTA a channel, each on an SM of its own that no compute kernel shares (NVIDIA/nccl#689), so compute
// beside it runs on the SMs it leaves: slower by the profile's network.collective_sms over its sms.
// Written out here on hand-built stages (a prefetched ZeRO-3 gather, an asynchronous input-gradient
// all-reduce) and checked on decks (data-parallel buckets during the backward, ZeRO-1's parameter
// gather beside the next forward), with the profile's figures read and written back.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "predict/key_costs.hpp"
#include "predict/network_cost.hpp"
#include "predict/pipeline_sim.hpp"
#include "predict/predict_report.hpp"
#include "predict/step_sim.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;

namespace {

// slow_sends() (nothing costs time on the network but sends) on a device of 100 SMs whose NCCL
// collectives hold a quarter of them, or on one whose SMs are not given (nothing held).
kp::MachineProfile quarter_held(bool held) {
  kp::MachineProfile p = slow_sends();
  p.sms = held ? 100 : 0;
  p.collective_sms_intra = p.collective_sms_inter = held ? 25 : 0;
  return p;
}

}  // namespace

// The ZeRO-3 stage of Zero3GathersOverlappedWaitOnlyForWhatOutlastsTheUnitBefore: three units of
// 3 ms forward and 6 ms backward, 2 ms gathers prefetched one unit ahead (29 ms when they cost the
// compute nothing). Each of the four gathers that run beside a unit's compute holds a quarter of the
// SMs for its 2 ms, so that unit ends 0.25 x 2 ms later: 31 ms; the first gather, waited for with
// nothing beside it, still the only exposed time.
TEST(PredictContention, APrefetchedGatherSlowsTheUnitItRunsBeside) {
  const auto stage = [](bool held) { return zero3_stage(quarter_held(held), true, 2000); };
  const kp::StageTimeline free = stage(false), held = stage(true);
  EXPECT_NEAR(free.wall_us, 29000, 1e-6);
  EXPECT_NEAR(held.wall_us, 29000 + 4 * 0.25 * 2000, 1e-6);
  EXPECT_NEAR(held.forward_us, 2000 + 3 * 3000 + 2 * 0.25 * 2000, 1e-6);
  EXPECT_NEAR(held.exposed_us, 2000, 1e-6);
  EXPECT_NEAR(kp::union_us(held.busy), 3 * 3000 + 3 * 6000 + 4 * 0.25 * 2000, 1e-6);
}

// predict.tp_input_grad=overlapped: an input gradient's all-reduce runs beside the weight half of
// its GEMM (2 ms of a 4 ms backward GEMM). A 3 ms call outlasts that half: 1 ms shows, as without
// SMs held (the GEMM, slowed, still ends inside it). A 1 ms call ends inside the half, which it slows
// by a quarter of its 1 ms: 0.25 ms shows where nothing showed.
TEST(PredictContention, AnInputGradientCollectiveSlowsTheGemmBesideIt) {
  const auto backward = [](bool held, double call_us) {
    kp::MachineProfile p = quarter_held(held);
    p.intra_node.collectives["allreduce"] = {{call_us, 0, 0}};
    p.inter_node = p.intra_node;
    kp::PipelineSetup s = one_stage_at_tp2();
    s.tp_input_grad = true;
    kp::ChunkWork w;
    w.forward = {{kp::ItemKind::compute, "f", 1, 0, 0}};
    w.backward = {{kp::ItemKind::compute, "matmul_backward", 4000, 0, 0, kformer::comm::OpKind::allreduce,
                   kformer::comm::Payload::other, 2000},
                  {kp::ItemKind::tp_comm, "", 0, 1e3, 0, kformer::comm::OpKind::allreduce,
                   kformer::comm::Payload::input_gradient}};
    s.chunks = {w};
    return kp::simulate_pipeline(s, kp::NetworkCost(p, {}), false).at(0).backward_us;
  };
  EXPECT_NEAR(backward(false, 3000), 5000, 1e-6);
  EXPECT_NEAR(backward(true, 3000), 5000, 1e-6);
  EXPECT_NEAR(backward(false, 1000), 4000, 1e-6);
  EXPECT_NEAR(backward(true, 1000), 4000 + 0.25 * 1000, 1e-6);
}

// predict.tp_comm=overlapped (Megatron-Core's --tp-comm-overlap through Transformer Engine's
// userbuffers): a reduce-scatter after a 4 ms GEMM and a gather of a weight's input before one hold
// TE's 16 SMs (of 100 here) beside them, so a 1 ms call shows 0.16 ms; a gather of activations
// (TE's ring_exchange: one SM and the copy engines) shows nothing, whatever the profile.
TEST(PredictContention, TransformerEnginesOverlapsHoldItsSixteenSms) {
  const auto forward = [](bool held, kformer::comm::OpKind op, kformer::comm::Payload what) {
    kp::MachineProfile p = quarter_held(held);
    for (const char* call : {"allgather", "reduce_scatter"}) p.intra_node.collectives[call] = {{1000, 0, 0}};
    p.inter_node = p.intra_node;
    kp::PipelineSetup s = one_stage_at_tp2();
    s.tp_overlap = true;
    const kp::WorkItem gemm{kp::ItemKind::compute, "matmul_forward", 4000, 0, 0};
    const kp::WorkItem call{kp::ItemKind::tp_comm, "", 0, 1e3, 0, op, what};
    kp::ChunkWork w;
    w.forward = op == kformer::comm::OpKind::reduce_scatter ? std::vector<kp::WorkItem>{gemm, call}
                                                            : std::vector<kp::WorkItem>{call, gemm};
    w.backward = {{kp::ItemKind::compute, "b", 1, 0, 0}};
    s.chunks = {w};
    return kp::simulate_pipeline(s, kp::NetworkCost(p, {}), false).at(0).forward_us;
  };
  using kformer::comm::OpKind;
  using kformer::comm::Payload;
  EXPECT_NEAR(forward(false, OpKind::reduce_scatter, Payload::activations), 4000, 1e-6);
  EXPECT_NEAR(forward(true, OpKind::reduce_scatter, Payload::activations), 4000 + 0.16 * 1000, 1e-6);
  EXPECT_NEAR(forward(true, OpKind::allgather, Payload::weight_input), 4000 + 0.16 * 1000, 1e-6);
  EXPECT_NEAR(forward(true, OpKind::allgather, Payload::activations), 4000, 1e-6);
}

// On a deck: tiny over 2 data-parallel ranks of one DGX A100 in bf16. Buckets reduced during the
// backward (predict.grad_reduce=overlapped) make it later by at most the SMs' share times the buckets'
// time, and by something; reduced after it (serialized) by nothing. ZeRO-1's parameter gather beside
// the next forward (predict.param_gather=overlapped) likewise.
TEST(PredictContention, OverlappedBucketsAndGathersCostTheirShareOnADeck) {
  const auto a100 = profile("dgx-a100-80gb");
  ASSERT_EQ(a100.sms, 108);
  ASSERT_EQ(a100.collective_sms_intra, 24);
  kp::MachineProfile none = a100;
  none.collective_sms_intra = none.collective_sms_inter = 0;
  const double share = 24.0 / 108;
  EXPECT_NEAR(kp::NetworkCost(a100, {}).compute_share_lost({2, 1}), share, 1e-12);
  EXPECT_EQ(kp::NetworkCost(a100, {}).compute_share_lost({1, 1}), 0);
  const auto cost = [&](const std::vector<std::string>& keys) {
    std::vector<std::string> o = {"predict.world=2", "parallel.dp=2", "train.precision=bf16"};
    o.insert(o.end(), keys.begin(), keys.end());
    const kformer::RunPlan pl = plan("tiny.yaml", o);
    const kp::StepPrediction with = kp::predict_step(pl, a100, false), without = kp::predict_step(pl, none, false);
    std::string named = keys.empty() ? "kformer's keys" : "";
    for (const auto& k : keys) named += (named.empty() ? "" : " ") + k;
    std::cout << "tiny, dp 2, " << named << ": " << without.step_ms
              << " ms without the collectives' SMs, " << with.step_ms << " ms with them (communication "
              << without.rank0.comm_total_ms << " ms)" << std::endl;
    return std::make_pair(with.step_ms - without.step_ms, without.rank0.comm_total_ms);
  };
  const auto [buckets, buckets_comm] = cost({});
  EXPECT_GT(buckets, 0);
  EXPECT_LE(buckets, share * buckets_comm + 1e-9);
  EXPECT_EQ(cost({"predict.grad_reduce=serialized"}).first, 0);
  const std::vector<std::string> zero1 = {"parallel.zero=1", "predict.grad_reduce=serialized"};
  auto gathered = zero1;
  gathered.push_back("predict.param_gather=overlapped");
  const auto [gather, gather_comm] = cost(gathered);
  EXPECT_GT(gather, 0);
  EXPECT_LE(gather, share * gather_comm + 1e-9);
  EXPECT_EQ(cost(zero1).first, 0);
}

// predict.breakdown says what the held SMs cost: the step against the same step on the profile with
// none held, in the report and a summary line; nothing where the profile holds none.
TEST(PredictContention, TheBreakdownSaysWhatTheHeldSmsCost) {
  const auto a100 = profile("dgx-a100-80gb");
  kp::MachineProfile none = a100;
  none.collective_sms_intra = none.collective_sms_inter = 0;
  const kformer::RunSettings s =
      kformer::read_prediction_deck("predict", {kSource + "/input/tiny.yaml", "predict.world=2", "parallel.dp=2",
                                                "train.precision=bf16"}, false).settings;
  const double step = kp::predicted_step_ms(s, a100), without = kp::predicted_step_ms(s, none);
  EXPECT_GT(step, without);
  nlohmann::json report;
  const std::string text = kp::add_key_costs(report, s, a100, step);
  EXPECT_DOUBLE_EQ(report["predicted"]["collective_sms_cost_ms"].get<double>(), step - without);
  EXPECT_NE(text.find("what the collectives' SMs cost"), std::string::npos) << text;
  nlohmann::json plain;
  EXPECT_EQ(kp::add_key_costs(plain, s, none, without).find("collectives' SMs"), std::string::npos);
  EXPECT_FALSE(plain["predicted"].contains("collective_sms_cost_ms"));
}

// The figures are read, written back by profile_yaml, and absent (nothing held) where a profile
// does not give them.
TEST(PredictContention, TheProfilesSmFiguresAreReadAndWrittenBack) {
  const auto h100 = profile("h100-sxm-80gb");
  EXPECT_EQ(h100.sms, 132);
  EXPECT_EQ(h100.collective_sms_intra, 24);
  EXPECT_EQ(h100.collective_sms_inter, 16);
  const std::string path = testing::TempDir() + "/sms_profile.yaml";
  std::ofstream(path) << kp::profile_yaml(h100, "# again\n");
  const auto again = kp::load_profile(path);
  EXPECT_EQ(again.sms, 132);
  EXPECT_EQ(again.collective_sms_intra, 24);
  EXPECT_EQ(again.collective_sms_inter, 16);
  std::remove(path.c_str());
  // The report says what was charged.
  const kformer::RunPlan pl = plan("tiny.yaml", {"predict.world=2", "parallel.dp=2", "train.precision=bf16"});
  const auto report = kp::predict_report(pl, h100, kp::predict_step(pl, h100, false));
  EXPECT_EQ(report["predicted"]["collective_sms"]["device"], 132);
  EXPECT_EQ(report["predicted"]["collective_sms"]["inter_node"], 16);
  const auto measured = profile("h200-measured");
  EXPECT_EQ(measured.collective_sms_intra + measured.collective_sms_inter, 0);
  EXPECT_EQ(kp::NetworkCost(measured, {}).compute_share_lost({8, 1}), 0);
}
