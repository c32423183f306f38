// One predicted training step of a deck's layout at its world size: each stage's prepare phase
// (its kernels: the gradients zeroed, the bf16 weight copies refreshed), the pipeline of every
// stage from there (pipeline_sim.hpp), the straggler's wait (straggler.*), the data-parallel buckets finished
// (overlapped with the backward where the network progresses on its own, else at the wait), then
// the rest of the iteration as the step program describes it for each stage (grad_sync,
// grad_norm, optimizer, metrics: train/step_work.hpp describe_phases): its kernels on the profile,
// its calls on groups as collectives that end for all members at the latest arrival plus their
// cost. No work after the pipeline is modelled here by hand: only its timing. All replicas of a
// pipeline stage behave alike except the straggler, so a stage is described once.
#pragma once

#include <map>
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
  // rank 0's compute by what it is (StageTimeline::kernel_us), with its prepare and after-pipeline
  // kernels and what the data-parallel buckets' SMs slow, in ms: each at the profile's cost
  std::map<std::string, double> rank0_kernel_ms;
  std::vector<double> rank_busy_ms, rank_comm_ms, rank_bubble;  // every world rank
  double flops_rank0 = 0;                // model FLOPs per iteration of rank 0
  std::vector<int> traced_ranks;         // world ranks whose events are in `spans`
  std::vector<std::vector<SimSpan>> spans;
};

// `record`: keep the events of each stage's first replica (and the straggler) for the trace.
StepPrediction predict_step(const RunPlan& plan, const MachineProfile& profile, bool record);

}  // namespace kformer::predict
