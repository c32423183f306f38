// The plan of a run, built once from its settings before anything is allocated: the model's shape
// at the run's tensor parallelism, a block's sizes on one rank, the layers of each pipeline chunk,
// the pipeline schedule of every rank, and the memory estimate per rank (which describing a step
// of the plan gives: train/make_plan.hpp makes the whole plan). The trainer, the report,
// checkpoints, predict and calibrate all take it, so that none of them derives these again (and
// none can derive them differently).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/block_dims.hpp"
#include "plan/memory.hpp"
#include "model/model_spec.hpp"
#include "model/numerics.hpp"
#include "platform/node_memory.hpp"
#include "parallel/schedule.hpp"
#include "settings/run_settings.hpp"

namespace kformer {

struct RunPlan {
  RunSettings settings;
  ModelShape shape;                         // at parallel.tp
  BlockDims dims;                           // one micro-batch through one block on one TP rank
  std::vector<std::pair<int, int>> chunks;  // (first layer, layers) of each of the pp*v chunks
  Schedule schedule;                        // [pipeline rank] -> its actions, in order
  // The attention kernel run: kernels.attention when the deck names one; for auto, `fused` until
  // start-up has timed the candidates (attention_choice.hpp) and with_attention() set the winner.
  AttentionKind attention = AttentionKind::fused;
  // The GEMM run: kernels.gemm when the deck names one; for auto, native until start-up has timed
  // both (measure/gemm_choice.hpp) and with_gemm() set the faster.
  kernels::GemmImpl gemm = kernels::GemmImpl::native;
  // The build a described step follows: this one's, or kformer's CUDA build's where predict costs
  // kformer's own run on a GPU's profile (its kformer_build: cuda).
  kernels::CodePath code_path = kernels::CodePath::this_build;
  Numerics numerics;                        // element types and what ZeRO shards (model/numerics.hpp)
  MemoryEstimate memory;                    // per rank: the largest pipeline stage's, with `attention`
};

// The blocks full recomputation re-runs over the whole model (train.recompute_layers of each chunk,
// or all): the report's and predict's hardware FLOPs.
int fully_recomputed_layers(const RunPlan& plan);

// Everything but `memory` (left empty): what the deck fuzzer checks, which has no Kokkos to
// describe a step with. Throws std::invalid_argument for settings validation would have refused
// (a schedule that cannot take the micro-batches).
RunPlan plan_without_memory(RunSettings settings);

// The plan with start-up's GEMM (the estimate already counts the native GEMM's workspace for auto).
RunPlan with_gemm(RunPlan plan, kernels::GemmImpl impl);

}  // namespace kformer
