// The settings of a run, typed: every deck key read once, after validation, into a field of its
// own type (an enum for every closed set), by read_settings() (settings/read_settings.cpp). Past
// start-up nothing sees the Config or a key string: the trainer, the report, checkpoints,
// predict and calibrate take these (or the RunPlan built from them). The deck echo keeps the
// resolved deck as the user sees it, for the start-up lines, the report and checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "settings/choices.hpp"
#include "settings/deck_echo.hpp"

namespace kformer {

struct ModelSettings {
  Family family = Family::gpt;
  int n_layers = 0, d_model = 0, n_heads = 0, n_kv_heads = 0, ffn_dim = 0, vocab_size = 0, max_seq_len = 0;
};

struct TrainSettings {
  int steps = 0, global_batch = 0, micro_batch = 0, seq_len = 0, warmup = 0, max_nan = 0, stop_at = 0;
  double lr = 0, weight_decay = 0, grad_clip = 0;
  std::uint64_t seed = 0;
  Precision precision = Precision::fp32;
  Recompute recompute = Recompute::none;
  int recompute_layers = 0;  // train.recompute_layers: with full, the first N blocks of a chunk; 0 = all

  // How many of a chunk's blocks re-run their forward before their backward (train.recompute=full).
  int full_recompute_blocks(int chunk_layers) const {
    if (recompute != Recompute::full) return 0;
    return recompute_layers > 0 && recompute_layers < chunk_layers ? recompute_layers : chunk_layers;
  }
  // How many of a chunk's blocks run their forward code again before their backward: full's, and
  // under op every block (torchtitan's checkpoint re-runs the block, the kept outputs returned from
  // its cache): an eager host's time for a forward each (predict.host).
  int rerun_forward_blocks(int chunk_layers) const {
    return recompute == Recompute::op ? chunk_layers : full_recompute_blocks(chunk_layers);
  }
};

struct ParallelSettings {
  int tp = 1, pp = 1, dp = 1, zero = 0;
  Precision grad_reduce_dtype = Precision::fp32;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  bool sequence_parallel = false;  // as given; ModelShape applies it only with tp > 1
  int microbatches = 1, virtual_stages = 1;
  std::vector<int> stage_layers;  // empty: as even as possible
};

struct CommSettings {
  std::string backend;  // resolved: "mpi", "nccl" or "self" (the factory's names, comm/runtime.hpp)
  std::string auto_reason;  // why `auto` became `backend`; "" when the deck named it
  double latency_us = 0, bandwidth_gbps = 0;  // comm.emulate; 0 = none
  double timeout_s = 0;
  bool strict = false;
};

struct KernelSettings {
  GemmSetting gemm = GemmSetting::automatic;
  AttentionSetting attention = AttentionSetting::automatic;  // the kind run: RunPlan::attention
};

struct CheckpointSettings {
  std::string save, load;  // directories; "" = none
  int every = 0;
};

struct OutputSettings {
  std::string json, trace, export_dir;  // "" = none
  int log_every = 1;
  bool phase_timing = false;
  bool kernel_times = false;  // time each kernel call between fences (platform/kernel_times.hpp)
  double peak_tflops = 0;  // 0 = not given
};

struct StragglerSettings {
  int rank = -1;  // -1: none
  double slowdown = 1;
};

struct CalibrateSettings {  // kformer calibrate's repeats (measure/stable_figure.hpp)
  double agreement = 0.1;  // the whole model's scale: three repeats in a row within this fraction
  int max_repeats = 8;
};

struct PredictSettings {
  std::string machine;  // profile path; "" = the default profile
  std::int64_t world = 0;  // 0 = tp*pp*dp
  std::string system = "kformer";  // predict.system: whose software's run is costed (settings/systems.hpp)
  AttentionModel attention = AttentionModel::kformer;
  PipelineP2p pipeline_p2p = PipelineP2p::overlapped;
  GradReduce grad_reduce = GradReduce::overlapped;
  Overlap tp_comm = Overlap::serialized;
  Overlap tp_input_grad = Overlap::serialized;
  TpPrecision tp_precision = TpPrecision::fp32;
  double attention_dropout = 0;
  Overlap param_gather = Overlap::serialized;
  GatherCopy gather_copy = GatherCopy::none;
  ScatterCopy scatter_copy = ScatterCopy::none;
  Overlap zero3_gather = Overlap::serialized;
  PipelineMessages pipeline_messages = PipelineMessages::split;
  PipelineCalls pipeline_calls = PipelineCalls::grouped;
  ResidualStream residual = ResidualStream::fp32;
  Fusion rmsnorm = Fusion::fused;
  Fusion pointwise = Fusion::fused;
  LossKernels loss = LossKernels::fused;
  LogitsLayout logits = LogitsLayout::sharded;
  TrainMetrics train_metrics = TrainMetrics::none;
  MemoryModel memory = MemoryModel::kformer;
  GradAccumulation grad_accumulate = GradAccumulation::fused;
  BucketPass bucket_pass = BucketPass::none;
  EmbeddingGrad embedding_grad = EmbeddingGrad::sparse;
  HostCost host = HostCost::kformer;
  bool largest_micro_batch = false;  // predict.largest_micro_batch: search the largest that fits (largest_fit.hpp)
  bool breakdown = false;  // predict.breakdown: what each key above that departs from kformer's costs
};

struct RunSettings {
  ModelSettings model;
  TrainSettings train;
  ParallelSettings parallel;
  CommSettings comm;
  KernelSettings kernels;
  CheckpointSettings checkpoint;
  OutputSettings output;
  StragglerSettings straggler;
  PredictSettings predict;
  CalibrateSettings calibrate;
  std::string data_source;  // "random" or a token file
  double memory_limit_gb = 0;  // 0 = the node's share
  DeckEcho deck;  // the resolved deck as given, for printing and saving only

  bool bf16() const { return train.precision == Precision::bf16; }
  int ranks() const { return parallel.tp * parallel.pp * parallel.dp; }
};

}  // namespace kformer
