// The training loop (see trainer.hpp).
#include "train/trainer.hpp"

#include <Kokkos_Timer.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "platform/errors.hpp"
#include "platform/profiling_region.hpp"
#include "platform/stop_signals.hpp"
#include "train/rank_table.hpp"
#include "train/straggler.hpp"

namespace kformer {

Trainer::Trainer(const RunPlan& plan, comm::Communicator& world, comm::Mesh& mesh,
                 std::shared_ptr<comm::TraceLog> trace)
    : cfg_(plan.settings), world_(world), mesh_(mesh), trace_(std::move(trace)), shape_(plan.shape),
      micro_batch_(cfg_.train.micro_batch), seq_len_(cfg_.train.seq_len), global_batch_(cfg_.train.global_batch),
      microbatches_(cfg_.parallel.microbatches) {
  const RankPlace at{mesh.pp_rank, mesh.tp_rank, mesh.dp_rank};
  const RankGroups groups{mesh.tp.get(), mesh.dp.get(), mesh.pp.get()};
  model_ = build_rank_model(plan, at, groups);
  model_->params->initialize(cfg_.train.seed);
  // The tied table (gpt) lives on the first and the last stage: one group per (dp, tp) pair of
  // them sums its gradient (every rank takes part in the split).
  const bool tied = holds_tied_embedding(plan, at);
  const int pair = mesh.dp_rank * mesh.shape.tp + mesh.tp_rank;
  embedding_group_ = world.split(tied ? pair : mesh.shape.dp * mesh.shape.tp + world.rank(), mesh.pp_rank);
  if (tied)
    embedding_group_->set_name("tied-embedding");
  else
    embedding_group_.reset();
  program_ = std::make_unique<StepProgram>(plan, *model_, at, StepGroups{groups, &world, embedding_group_.get()});
  data_ = make_data_source(cfg_.data_source, shape_.vocab, cfg_.train.seed);
  model_flops_rank_ = model_flops_per_token(shape_, seq_len_) * double(global_batch_) * seq_len_ / world.size();
  if (cfg_.output.kernel_times) kernel_times_ = std::make_unique<KernelTimes>();
}

Flops Trainer::flops_per_iteration() const {
  Flops f;
  for (const auto& s : model_->stages) f += s->flops();
  f.forward *= microbatches_;
  f.backward *= microbatches_;
  f.recompute *= microbatches_;
  return f;
}

void Trainer::resume(const TrainingPosition& at) {
  first_iteration_ = at.iteration + 1;
  sample_base_ = at.consumed_samples;
  skipped_ = at.skipped;
  nan_ = at.nan;
}

TrainingPosition Trainer::position(int it) const {
  TrainingPosition at;
  at.iteration = it;
  at.consumed_samples = sample_base_ + std::int64_t(it - first_iteration_ + 1) * global_batch_;
  at.consumed_tokens = at.consumed_samples * seq_len_;
  at.skipped = skipped_;
  at.nan = nan_;
  return at;
}

int Trainer::last_iteration() const {
  const int steps = cfg_.train.steps, stop_at = cfg_.train.stop_at;
  return stop_at > 0 ? std::min(stop_at, steps) : steps;
}

void Trainer::run() {
  const int steps = cfg_.train.steps, log_every = cfg_.output.log_every;
  const int every = cfg_.checkpoint.every, last = last_iteration();
  for (int it = first_iteration_; it <= last; ++it) {
    IterationRecord r = iterate(it);
    records_.push_back(r);
    if (after_iteration) after_iteration(r);
    const bool end = it == last || r.stop_signal != 0;
    if (world_.rank() == 0 && (it % log_every == 0 || end)) std::cout << format_log_line(r) << std::endl;
    if (nan_in_a_row_ >= cfg_.train.max_nan)
      throw TrainingStopped("the loss or gradient norm was not finite for " + std::to_string(nan_in_a_row_) +
                            " iterations in a row (train.max_nan=" + std::to_string(cfg_.train.max_nan) +
                            "), each skipped on every rank: lower train.lr or raise train.warmup");
    if (save_checkpoint && (end || (every > 0 && it % every == 0))) {
      const ProfilingRegion region("kformer::checkpoint");
      save_checkpoint(position(it));
    }
    if (r.stop_signal != 0) {
      if (world_.rank() == 0)
        std::cout << "kformer: stopped after iteration " << it << " of " << steps << " on " << signal_name(r.stop_signal)
                  << " (rank " << r.stop_rank << " got it first)"
                  << (save_checkpoint ? "; resume with checkpoint.load=" + cfg_.checkpoint.save
                                      : std::string("; no checkpoint.save was set, so nothing was saved"))
                  << std::endl;
      return;
    }
  }
}

IterationRecord Trainer::iterate(int it) {
  const ProfilingRegion step_region("kformer::step");
  // output.kernel_times: the run's first step sets up what later steps reuse (handles, plans,
  // kept buffers), so it is timed only where it is the run's one step.
  KernelTimes* const timed =
      kernel_times_ && (it > first_iteration_ || last_iteration() == first_iteration_) ? kernel_times_.get() : nullptr;
  const TimingCalls timing(timed);
  Kokkos::Timer step_timer;
  if (trace_) trace_->clear();
  IterationRecord r;
  r.iteration = it;
  r.total = cfg_.train.steps;
  r.global_batch = global_batch_;
  const int T = seq_len_, dp = mesh_.shape.dp;
  const std::int64_t tokens_per_iter = std::int64_t(global_batch_) * T;

  program_->prepare();
  const std::int64_t first = sample_base_ + std::int64_t(it - first_iteration_) * global_batch_ +
                             std::int64_t(mesh_.dp_rank) * (global_batch_ / dp);
  program_->pipeline(*data_, first, 1.0f / static_cast<float>(tokens_per_iter));
  const double compute_ms = model_->pipeline->compute_ms;
  double busy_ms = compute_ms;
  for (const auto& s : model_->stages) {
    r.forward_ms += s->forward_ms;
    r.backward_ms += s->backward_ms;
  }
  const Stretch stretch = stretch_if_straggler(cfg_.straggler, world_.rank(), busy_ms);  // the same numbers, later
  busy_ms += stretch.added_ms;
  program_->grad_sync();
  if (after_backward) after_backward(it);
  const StepSums sums = program_->grad_norm();
  r.loss = sums.loss_sum / double(tokens_per_iter);
  r.grad_norm = std::sqrt(sums.grad_sq);

  Kokkos::Timer opt_timer;
  r.optimizer_start_us = comm::TraceLog::now_us();
  const bool finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (finite) {
    const double clip = cfg_.train.grad_clip;
    program_->optimizer(it, clip > 0 && r.grad_norm > clip ? clip / (r.grad_norm + 1e-6) : 1.0);
    nan_in_a_row_ = 0;
  } else {
    ++skipped_, ++nan_, ++nan_in_a_row_;
  }
  r.optimizer_ms = opt_timer.seconds() * 1e3;
  r.optimizer_end_us = comm::TraceLog::now_us();
  busy_ms += r.optimizer_ms;
  r.skipped = !finite;
  r.skipped_total = skipped_;
  r.nan_total = nan_;
  r.lr = program_->adamw().learning_rate(it);
  r.pipeline_wall_ms = model_->pipeline->wall_ms;
  r.pipeline_compute_ms = model_->pipeline->compute_ms;

  // Communication: total = time with a call in flight; exposed = time the caller waited (blocking
  // calls, TP's all-reduces and the pipeline's receives among them, the waits for the pipeline's
  // groups of messages, and the wait for the DP buckets).
  if (trace_) {
    r.comm_total_ms = trace_->busy_us() / 1e3;
    for (const auto& rec : trace_->records())
      if (rec.blocking && rec.end_us >= 0) r.comm_exposed_ms += (rec.end_us - rec.start_us) / 1e3;
  }
  r.comm_exposed_ms += program_->sync_exposed_ms() + model_->pipeline->group_wait_ms;
  RankColumn mine;
  mine.busy_ms = busy_ms;
  mine.bubble = r.pipeline_wall_ms > 0 ? 1.0 - r.pipeline_compute_ms / r.pipeline_wall_ms : 0.0;
  mine.comm_ms = r.comm_total_ms;
  hold_after_signal_for_test();
  mine.stop_signal = stop_signal();
  mine.compute_ms = compute_ms;
  mine.stretch_ms = stretch.slept_ms;
  RankTable table(world_.size(), world_.rank(), mine);
  program_->metrics(table.values());
  table.read_into(r);

  r.elapsed_s = step_timer.seconds();
  const TrainingPosition after = position(it);
  r.consumed_samples = after.consumed_samples;
  r.consumed_tokens = after.consumed_tokens;
  r.samples_per_s = global_batch_ / r.elapsed_s;
  r.tokens_per_s = tokens_per_iter / r.elapsed_s;
  r.tflops_per_rank = model_flops_rank_ / r.elapsed_s / 1e12;
  if (timed) timed->step_done(r.elapsed_s * 1e3);
  return r;
}

}  // namespace kformer
