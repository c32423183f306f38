// The training loop: for each iteration, this rank's schedule of micro-batch forwards and
// backwards over its model chunks (the pipeline executor; with pp = 1 it is plain gradient
// accumulation), the bucketed data-parallel reduction, the tied-embedding sync between the first
// and last pipeline stage, the global gradient norm, clipping, AdamW, and the figures of the
// iteration. Every layout sees the same global batch: samples [(i-1)*GB, i*GB) of iteration i.
#pragma once

#include <memory>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "comm/mesh.hpp"
#include "comm/trace_log.hpp"
#include "io/data.hpp"
#include "platform/device_reduce.hpp"
#include "parallel/grad_sync.hpp"
#include "train/metrics.hpp"
#include "model/optimizer.hpp"
#include "parallel/pipeline.hpp"
#include "plan/run_plan.hpp"
#include "train/rank_model.hpp"
#include "model/stage.hpp"

namespace kformer {

class Trainer {
 public:
  // `gemm`: kernels.gemm resolved (gemm_choice.hpp; the deck may say auto).
  Trainer(const RunPlan& plan, comm::Communicator& world, comm::Mesh& mesh, std::shared_ptr<comm::TraceLog> trace,
          kernels::GemmImpl gemm);

  // Continue from a checkpoint: the next iteration is at.iteration + 1, at sample at.consumed_samples.
  void resume(const TrainingPosition& at);
  // Runs iterations up to train.steps (or train.stop_at, or the iteration in which a stop signal
  // reached any rank); rank 0 prints a log line every output.log_every. Calls save_checkpoint
  // every checkpoint.every iterations and after the last one, when it is set.
  void run();

  int first_iteration() const { return first_iteration_; }
  std::int64_t first_sample() const { return sample_base_; }  // of first_iteration()
  TrainingPosition position(int iteration) const;              // after `iteration` completed
  CheckpointContext checkpoint_context() { return {cfg_, mesh_, world_, *model_->params, *optimizer_}; }

  const std::vector<IterationRecord>& records() const { return records_; }
  const ParamStore& params() const { return *model_->params; }
  const std::vector<std::unique_ptr<Stage>>& stages() const { return model_->stages; }
  const Pipeline& pipeline() const { return *model_->pipeline; }
  Flops flops_per_iteration() const;  // this rank's FLOPs counted from its kernels' shapes (causal attention halved)
  // Called after the backward of `iteration`, before the optimizer (the reference export).
  std::function<void(int iteration)> after_backward;
  // Called after each iteration with its record (the timeline writer).
  std::function<void(const IterationRecord&)> after_iteration;
  // Called with the position to save (checkpoint.save).
  std::function<void(const TrainingPosition&)> save_checkpoint;

 private:
  IterationRecord iterate(int it);
  void sync_tied_embedding();

  const RunSettings& cfg_;
  comm::Communicator& world_;
  comm::Mesh& mesh_;
  std::shared_ptr<comm::TraceLog> trace_;
  ModelShape shape_;
  int micro_batch_, seq_len_, global_batch_, microbatches_, zero_;
  std::unique_ptr<RankModel> model_;  // parameters, chunks, pipeline
  double model_flops_rank_ = 0;       // an iteration's model FLOPs (the field's convention) over the world's ranks
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<GradSync> sync_;
  std::unique_ptr<DataSource> data_;
  std::unique_ptr<comm::Communicator> embedding_group_;  // first and last stage, same (dp, tp)
  DeviceReduce reduce_;  // the per-rank table, every iteration
  // The iteration's values the host must see, on the device: [0] the loss sum (the last chunk
  // adds into it; [1] is its scratch), [2] this rank's squared gradient norm. Reduced over the
  // groups there, then read in one copy into scalars_host_.
  DV<double*> scalars_;
  DV<double*>::HostMirror scalars_host_;
  std::vector<IterationRecord> records_;
  std::int64_t skipped_ = 0, nan_ = 0, nan_in_a_row_ = 0;
  int first_iteration_ = 1;
  std::int64_t sample_base_ = 0;  // global sample at which first_iteration_ starts
};

}  // namespace kformer
