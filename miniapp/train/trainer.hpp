// The training loop: each iteration runs the step program's phases (step_program.hpp: prepare,
// the pipeline of micro-batch forwards and backwards, the data-parallel and tied-embedding
// gradient sync, the global gradient norm, clipped AdamW, the per-rank table), with the injected
// straggler's wait (straggler.hpp) after the pipeline, and records the iteration's figures
// (metrics.hpp, rank_table.hpp). Every layout sees the same global batch: samples
// [(i-1)*GB, i*GB) of iteration i.
#pragma once

#include <memory>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "comm/mesh.hpp"
#include "comm/trace_log.hpp"
#include "io/data.hpp"
#include "train/metrics.hpp"
#include "parallel/pipeline.hpp"
#include "plan/run_plan.hpp"
#include "train/rank_model.hpp"
#include "train/step_program.hpp"
#include "model/stage.hpp"
#include "platform/kernel_times.hpp"

namespace kformer {

class Trainer {
 public:
  // The kernels are the plan's: kernels.gemm and kernels.attention as start-up resolved them.
  Trainer(const RunPlan& plan, comm::Communicator& world, comm::Mesh& mesh, std::shared_ptr<comm::TraceLog> trace);

  // Continue from a checkpoint: the next iteration is at.iteration + 1, at sample at.consumed_samples.
  void resume(const TrainingPosition& at);
  // Runs iterations up to train.steps (or train.stop_at, or the iteration in which a stop signal
  // reached any rank); rank 0 prints a log line every output.log_every. Calls save_checkpoint
  // every checkpoint.every iterations and after the last one, when it is set.
  void run();

  int first_iteration() const { return first_iteration_; }
  std::int64_t first_sample() const { return sample_base_; }  // of first_iteration()
  TrainingPosition position(int iteration) const;              // after `iteration` completed
  CheckpointContext checkpoint_context() { return {cfg_, mesh_, world_, *model_->params, program_->adamw()}; }

  const std::vector<IterationRecord>& records() const { return records_; }
  const ParamStore& params() const { return *model_->params; }
  const std::vector<std::unique_ptr<Stage>>& stages() const { return model_->stages; }
  const Pipeline& pipeline() const { return *model_->pipeline; }
  // output.kernel_times: this rank's kernel calls, timed in every step after the run's first (in
  // its only step where it has one); nullptr when not asked for.
  const KernelTimes* kernel_times() const { return kernel_times_.get(); }
  Flops flops_per_iteration() const;  // this rank's FLOPs counted from its kernels' shapes (causal attention halved)
  // Called after the backward of `iteration`, before the optimizer (the reference export).
  std::function<void(int iteration)> after_backward;
  // Called after each iteration with its record (the timeline writer).
  std::function<void(const IterationRecord&)> after_iteration;
  // Called with the position to save (checkpoint.save).
  std::function<void(const TrainingPosition&)> save_checkpoint;

 private:
  IterationRecord iterate(int it);
  int last_iteration() const;  // train.steps, or train.stop_at where it comes first

  const RunSettings& cfg_;
  comm::Communicator& world_;
  comm::Mesh& mesh_;
  std::shared_ptr<comm::TraceLog> trace_;
  ModelShape shape_;
  int micro_batch_, seq_len_, global_batch_, microbatches_;
  std::unique_ptr<RankModel> model_;  // parameters, chunks, pipeline
  double model_flops_rank_ = 0;       // an iteration's model FLOPs (the field's convention) over the world's ranks
  std::unique_ptr<comm::Communicator> embedding_group_;  // first and last stage, same (dp, tp)
  std::unique_ptr<StepProgram> program_;                 // the iteration's phases
  std::unique_ptr<DataSource> data_;
  std::vector<IterationRecord> records_;
  std::unique_ptr<KernelTimes> kernel_times_;
  std::int64_t skipped_ = 0, nan_ = 0, nan_in_a_row_ = 0;
  int first_iteration_ = 1;
  std::int64_t sample_base_ = 0;  // global sample at which first_iteration_ starts
};

}  // namespace kformer
