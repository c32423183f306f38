// The training loop: for each iteration, the micro-batches of this data-parallel rank through the
// model (gradient accumulation), the bucketed data-parallel reduction, the global gradient norm,
// clipping, AdamW, and the figures of the iteration (log line, JSON record, time split,
// stragglers). Every layout sees the same global batch: samples [(i-1)*GB, i*GB) of iteration i.
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/mesh.hpp"
#include "comm/trace_log.hpp"
#include "config.hpp"
#include "data.hpp"
#include "grad_sync.hpp"
#include "metrics.hpp"
#include "model.hpp"
#include "optimizer.hpp"

namespace kformer {

class Trainer {
 public:
  Trainer(const Config& cfg, comm::Communicator& world, comm::Mesh& mesh, std::shared_ptr<comm::TraceLog> trace);

  // Runs iterations first..train.steps; rank 0 prints a log line every output.log_every.
  void run(int first_iteration = 1);

  const std::vector<IterationRecord>& records() const { return records_; }
  const ParamStore& params() const { return *params_; }
  const Model& model() const { return *model_; }
  // Called after the backward of `iteration`, before the optimizer (the reference export).
  std::function<void(int iteration)> after_backward;

 private:
  IterationRecord iterate(int it);

  const Config& cfg_;
  comm::Communicator& world_;
  comm::Mesh& mesh_;
  std::shared_ptr<comm::TraceLog> trace_;
  ModelShape shape_;
  int micro_batch_, seq_len_, global_batch_, microbatches_;
  std::unique_ptr<ParamStore> params_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<GradSync> sync_;
  std::unique_ptr<DataSource> data_;
  std::vector<IterationRecord> records_;
  std::int64_t skipped_ = 0, nan_ = 0, nan_in_a_row_ = 0;
};

}  // namespace kformer
