// One predicted training step of a deck's layout at its world size: the pipeline of every stage
// (pipeline_sim.hpp), then what Trainer::iterate does after it on every rank, in its order: the
// straggler's wait (straggler.*), the data-parallel buckets finished (overlapped with the
// backward where the network progresses on its own, else at the wait), the tied embedding's
// all-reduce, the loss and gradient-norm reductions, AdamW with ZeRO's all-gathers, and the
// per-rank table. Collectives end for all members at the latest arrival plus their cost. All
// replicas of a pipeline stage behave alike except the straggler, so a stage is simulated once.
#pragma once

#include <string>
#include <vector>

#include "plan/run_plan.hpp"
#include "predict/machine_profile.hpp"
#include "predict/pipeline_sim.hpp"

namespace kformer::predict {

struct RankFigures {  // what a run's per-iteration record holds, in ms
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0, comm_total_ms = 0, comm_exposed_ms = 0;
  double pipeline_wall_ms = 0, pipeline_compute_ms = 0, busy_ms = 0;
  double bubble() const { return pipeline_wall_ms > 0 ? 1.0 - pipeline_compute_ms / pipeline_wall_ms : 0.0; }
};

struct StepPrediction {
  double step_ms = 0;
  RankFigures rank0;                     // the figures a run reports (rank 0's)
  std::vector<double> rank_busy_ms, rank_comm_ms, rank_bubble;  // every world rank
  double flops_rank0 = 0;                // model FLOPs per iteration of rank 0
  std::vector<int> traced_ranks;         // world ranks whose events are in `spans`
  std::vector<std::vector<SimSpan>> spans;
};

// `record`: keep the events of each stage's first replica (and the straggler) for the trace.
StepPrediction predict_step(const RunPlan& plan, const MachineProfile& profile, bool record);

}  // namespace kformer::predict
