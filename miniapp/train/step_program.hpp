// One training iteration as named phases, each a unit of its own. Trainer::iterate runs them in
// this order, and describe_iteration (step_work.hpp) runs the very same units under a Describing
// scope over recording groups, so the list that predict costs and the work-list test checks is
// the whole iteration's, not only its pipeline's:
//   prepare    kformer::prepare    the gradients and the step's scalars zeroed, the bf16 copies
//                                  of the masters refreshed
//   pipeline   kformer::pipeline   the micro-batches' forwards and backwards (Pipeline::run); as the
//                                  last micro-batch's backward completes a unit, its gradients go
//                                  to the data-parallel buckets (kformer::unit_done)
//   grad_sync  kformer::grad_sync  the buckets waited for, the tied embedding's all-reduce
//   grad_norm  kformer::grad_norm  the loss (over pp and dp) and the squared gradient norm (over
//                                  the world) reduced on the device, then read back in one copy
//   optimizer  kformer::optimizer  AdamW, clipped, with ZeRO's all-gathers, then the step's fence
//   metrics    kformer::metrics    the per-rank table summed over the world
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "io/data.hpp"
#include "model/optimizer.hpp"
#include "parallel/grad_sync.hpp"
#include "plan/run_plan.hpp"
#include "platform/device_reduce.hpp"
#include "train/rank_model.hpp"

namespace kformer {

struct StepGroups {
  RankGroups mesh;
  comm::Communicator* world = nullptr;
  comm::Communicator* tied = nullptr;  // the tied embedding's pair of stages (holds_tied_embedding)
};

// Whether the rank at `at` holds a copy of gpt's tied table that is summed with another stage's:
// with pp > 1, the first stage and the stage of the last chunk, one pair per (dp, tp).
bool holds_tied_embedding(const RunPlan& plan, RankPlace at);

// The world rank of the mesh place `at` (comm::build_mesh's numbering: tp fastest, then dp, pp).
int world_rank(const ParallelSettings& par, RankPlace at);

struct StepSums {  // what the host reads back; zero while the step is described
  double loss_sum = 0, grad_sq = 0;
};

class StepProgram {
 public:
  StepProgram(const RunPlan& plan, RankModel& model, RankPlace at, StepGroups groups);

  void prepare();
  // first_sample: this rank's first sample of the iteration; grad_scale: 1 / the global tokens.
  void pipeline(const DataSource& data, std::int64_t first_sample, float grad_scale);
  // The pipeline's hook as the last micro-batch's backward completes the unit(s) of `layer`: its
  // gradients posted to the data-parallel buckets, inside the region kformer::unit_done.
  void unit_done(int layer);
  void grad_sync();
  StepSums grad_norm();
  void optimizer(int iteration, double clip_scale);
  // The per-rank table (rank_table.hpp), summed over the world in place.
  void metrics(std::vector<double>& table);

  Optimizer& adamw() { return *optimizer_; }
  double sync_exposed_ms() const { return sync_->exposed_ms(); }

 private:
  const RunPlan& plan_;
  RankModel& model_;
  StepGroups groups_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<GradSync> sync_;
  DeviceReduce reduce_;  // the per-rank table, every iteration
  // The iteration's values the host must see, on the device: [0] the loss sum (the last chunk
  // adds into it; [1] is its scratch), [2] this rank's squared gradient norm. Reduced over the
  // groups there, then read in one copy into scalars_host_.
  DV<double*> scalars_;
  DV<double*>::HostMirror scalars_host_;
};

}  // namespace kformer
