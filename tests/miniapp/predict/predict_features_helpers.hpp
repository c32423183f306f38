// Helpers of the prediction feature tests (test_predict_features.cpp, test_predict_systems.cpp):
// profiles and plans from the source tree, the items of a chunk's lists, the GEMM curve written
// out, and small pipeline setups whose work the tests write by hand.
#pragma once

#include <string>
#include <vector>

#include "parallel/pipeline_program.hpp"
#include "parallel/schedule.hpp"
#include "predict/chunk_work.hpp"
#include "predict/machine_profile.hpp"
#include "predict/network_cost.hpp"
#include "predict/pipeline_sim.hpp"
#include "settings/prediction_deck.hpp"
#include "train/make_plan.hpp"

namespace predict_features {

namespace kp = kformer::predict;

inline const std::string kSource = KFORMER_SOURCE_DIR;

inline kp::MachineProfile profile(const std::string& name) {
  return kp::load_profile(kSource + "/input/machines/" + name + ".yaml");
}

inline kformer::RunPlan plan(const std::string& file, std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), kSource + "/input/" + file);
  return kformer::make_plan(kformer::read_prediction_deck("predict", overrides, false).settings);
}

inline double sum(const std::vector<kp::WorkItem>& items, kp::ItemKind kind) {
  double t = 0;
  for (const auto& i : items)
    if (i.kind == kind) t += kind == kp::ItemKind::compute ? i.us : i.bytes;
  return t;
}

inline std::vector<kp::WorkItem> of_kind(const std::vector<kp::WorkItem>& items, kp::ItemKind kind) {
  std::vector<kp::WorkItem> out;
  for (const auto& i : items)
    if (i.kind == kind) out.push_back(i);
  return out;
}

// The TP calls of a block's forward or backward without sequence parallelism: all-reduces. The
// chunk's work also holds the TP all-gather of the pipeline message it received (its 1/tp parts,
// BlockDims::splits_messages), which belongs to the chunk, not the block: left out.
inline std::vector<kp::WorkItem> block_tp_calls(const std::vector<kp::WorkItem>& items) {
  std::vector<kp::WorkItem> out;
  for (const auto& i : items)
    if (i.kind == kp::ItemKind::tp_comm && i.op != kformer::comm::OpKind::allgather) out.push_back(i);
  return out;
}
inline double bytes_of(const std::vector<kp::WorkItem>& items) {
  double b = 0;
  for (const auto& i : items) b += i.bytes;
  return b;
}

// Chunk 1 of tiny.yaml on 4 stages of one layer each at tp=2, with one more setting, on the A100
// profile: a middle chunk, whose forward is one block's forward alone (and its input's gather).
inline kp::ChunkWork middle_chunk(const std::string& setting) {
  return kp::chunk_work(profile("perlmutter-a100-40gb"),
                        plan("tiny.yaml", {"predict.world=8", "parallel.pp=4", "parallel.tp=2", setting}), 1);
}

// The profile's GEMM time for a forward GEMM of `flops` in one precision, written out here from
// the curve's definition (machine_profile.hpp), not through kernel_costs.
inline double curve_us(const kp::ComputeRates& r, double launch_us, double flops) {
  const double eff = r.gemm_max_efficiency * flops / (flops + r.gemm_half_efficiency_gflop * 1e9);
  return launch_us + flops / (r.gemm_peak_tflops * eff * 1e6);
}

// The A100 profile with every pipeline send taking 10 ms, whatever its size, and nothing else
// costing time on the network (nor a collective's SMs the compute beside it).
inline kp::MachineProfile slow_sends() {
  kp::MachineProfile p = profile("perlmutter-a100-40gb");
  p.sms = p.collective_sms_intra = p.collective_sms_inter = 0;
  p.intra_node = {};
  p.intra_node.fallback = {0, 0, 0};
  p.intra_node.collectives["send"] = {{10000, 0, 0}};
  p.inter_node = p.intra_node;
  return p;
}

// 1F1B over 2 stages of one chunk each, 4 micro-batches: forwards of 1 ms (then, with tp_call, one
// TP all-reduce on 2 ranks), backwards of 2 ms.
inline kp::PipelineSetup two_stages(bool tp_call) {
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
inline kp::PipelineSetup one_stage_at_tp2() {
  kp::PipelineSetup s;
  s.pp = 1, s.n_chunks = 1, s.microbatches = 1;
  const kformer::Schedule sched = kformer::make_schedule(kformer::ScheduleKind::one_f_one_b, 1, 1, 1);
  s.programs.push_back(kformer::comm_program(sched[0], 1, 1));
  s.gather_bytes.assign(1, {}), s.bucket_bytes.assign(1, {});
  s.tp = {2, 1}, s.pp_group = {1, 1};
  return s;
}

// One stage under ZeRO-3 over 2 ranks on profile p, its gathers taking gather_us each: three units
// of 3 ms forward and 6 ms backward, a pool of one gathered unit (as FSDP reshards after the
// forward), the gathers blocking or prefetched one unit ahead.
inline kp::StageTimeline zero3_stage(kp::MachineProfile p, bool prefetch, double gather_us) {
  p.intra_node.collectives["allgather"] = {{gather_us, 0, 0}};
  p.inter_node = p.intra_node;
  kp::PipelineSetup s = one_stage_at_tp2();
  s.tp = {1, 1}, s.dp = {2, 1};
  s.fsdp = true, s.gather_pool = 1, s.gather_prefetch = prefetch;
  s.gather_bytes[0] = {{0, 1e6}, {1, 1e6}, {2, 1e6}};
  kp::ChunkWork w;
  for (int layer = 0; layer < 3; ++layer) {
    w.forward.push_back({kp::ItemKind::require, "", 0, 1e6, layer});
    w.forward.push_back({kp::ItemKind::compute, "f", 3000, 0, 0});
  }
  for (int layer = 2; layer >= 0; --layer) {
    w.backward.push_back({kp::ItemKind::require, "", 0, 1e6, layer});
    w.backward.push_back({kp::ItemKind::compute, "b", 6000, 0, 0});
  }
  s.chunks = {w};
  return kp::simulate_pipeline(s, kp::NetworkCost(p, {}), false).at(0);
}

}  // namespace predict_features
