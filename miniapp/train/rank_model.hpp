// What one rank trains, built from the plan: its parameter store, its model chunks (stages) with
// the plan's recomputation and timing settings, and the pipeline executor over them. The trainer
// builds it over its communicators; a described step (step_work.hpp) builds the very same over
// recording ones, so the work predict costs is the work a run does.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "model/param_store.hpp"
#include "model/stage.hpp"
#include "parallel/pipeline.hpp"
#include "plan/run_plan.hpp"

namespace kformer {

struct RankPlace {  // a rank's coordinates in the mesh
  int pp = 0, tp = 0, dp = 0;
};

struct RankGroups {  // the groups a rank's model communicates over (nullptr: a group of one)
  comm::Communicator *tp = nullptr, *dp = nullptr, *pp = nullptr;
};

struct RankModel {  // held by pointer: the pipeline refers to the stages
  std::unique_ptr<ParamStore> params;
  std::vector<std::unique_ptr<Stage>> stages;  // this rank's chunks: global chunk c at index c / pp
  std::unique_ptr<Pipeline> pipeline;
};

// The kernels are the plan's (its gemm and attention). The parameters are left uninitialised.
std::unique_ptr<RankModel> build_rank_model(const RunPlan& plan, RankPlace at, RankGroups groups);

}  // namespace kformer
