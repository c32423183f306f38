// The training loop (see trainer.hpp).
#include "train/trainer.hpp"

#include <Kokkos_Timer.hpp>

#include <chrono>
#include <cmath>
#include <iostream>
#include <thread>

#include "comm/views.hpp"
#include "platform/errors.hpp"
#include "kokkos_compat.hpp"
#include "platform/profiling_region.hpp"
#include "platform/stop_signals.hpp"

namespace kformer {

Trainer::Trainer(const RunPlan& plan, comm::Communicator& world, comm::Mesh& mesh,
                 std::shared_ptr<comm::TraceLog> trace, kernels::GemmImpl gemm)
    : cfg_(plan.settings), world_(world), mesh_(mesh), trace_(std::move(trace)), shape_(plan.shape),
      micro_batch_(cfg_.train.micro_batch), seq_len_(cfg_.train.seq_len), global_batch_(cfg_.train.global_batch),
      microbatches_(cfg_.parallel.microbatches), zero_(cfg_.parallel.zero) {
  const RunSettings& cfg = cfg_;
  const int pp = mesh.shape.pp;
  const int S = static_cast<int>(plan.chunks.size());
  model_ = build_rank_model(plan, {mesh.pp_rank, mesh.tp_rank, mesh.dp_rank},
                            {mesh.tp.get(), mesh.dp.get(), mesh.pp.get()}, gemm);
  model_->params->initialize(cfg.train.seed);
  scalars_ = scratch<double*>("kformer::step_scalars", 3);
  scalars_host_ = Kokkos::create_mirror_view(scalars_);
  for (auto& st : model_->stages)
    if (st->chunk().last()) st->set_loss_sums(Kokkos::subview(scalars_, std::make_pair(0, 2)));

  // The tied table (gpt) lives on the first and the last stage: one group per (dp, tp) pair of
  // them sums its gradient; the last stage's copy is left out of the gradient norm.
  const bool last = (S - 1) % pp == mesh.pp_rank;
  const bool tied = shape_.gpt && pp > 1 && (mesh.pp_rank == 0 || last);
  const int pair = mesh.dp_rank * mesh.shape.tp + mesh.tp_rank;
  embedding_group_ = world.split(tied ? pair : mesh.shape.dp * mesh.shape.tp + world.rank(), mesh.pp_rank);
  if (tied)
    embedding_group_->set_name("tied-embedding");
  else
    embedding_group_.reset();
  OptimizerSettings os{cfg.train.lr, cfg.train.weight_decay, cfg.train.warmup, cfg.train.steps, zero_};
  optimizer_ = std::make_unique<Optimizer>(*model_->params, os, mesh.dp.get(), mesh.tp_rank,
                                           tied && mesh.pp_rank != 0 ? -1 : Optimizer::kNoMirror);
  sync_ = std::make_unique<GradSync>(*model_->params, mesh.dp.get(), zero_,
                                     cfg.parallel.grad_reduce_dtype == Precision::bf16);
  data_ = make_data_source(cfg.data_source, shape_.vocab, cfg.train.seed);
  model_flops_rank_ = model_flops_per_token(shape_, seq_len_) * double(global_batch_) * seq_len_ / world.size();
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

void Trainer::run() {
  const int steps = cfg_.train.steps, log_every = cfg_.output.log_every;
  const int stop_at = cfg_.train.stop_at, every = cfg_.checkpoint.every;
  const int last = stop_at > 0 ? std::min(stop_at, steps) : steps;
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

void Trainer::sync_tied_embedding() {
  if (!embedding_group_) return;
  std::size_t unit = 0;
  while (model_->params->units()[unit].layer != -1) ++unit;
  // Under ZeRO-2/3 each rank holds the reduced gradient of its own shard only; both stages shard
  // the unit alike, so the shards line up.
  const ParamStore& p = *model_->params;
  const std::int64_t size = p.units()[unit].size, n = zero_ >= 2 ? size / p.shards() : size;
  if (p.grads_bf16()) {  // the bf16 gradient buffer (ParamStore::grads_bf16)
    kernels::bf16* g = zero_ >= 2 ? p.shard_grads16(unit) : p.grads16().data() + p.units()[unit].offset;
    embedding_group_->allreduce(g, g, n, comm::DType::bf16, comm::ReduceOp::sum);
    return;
  }
  float* g = zero_ >= 2 ? p.shard_grads(unit) : p.grads().data() + p.units()[unit].offset;
  embedding_group_->allreduce(g, g, n, comm::DType::f32, comm::ReduceOp::sum);
}

IterationRecord Trainer::iterate(int it) {
  const ProfilingRegion step_region("kformer::step");
  Kokkos::Timer step_timer;
  if (trace_) trace_->clear();
  IterationRecord r;
  r.iteration = it;
  r.total = cfg_.train.steps;
  r.global_batch = global_batch_;
  const int T = seq_len_, dp = mesh_.shape.dp;
  const std::int64_t tokens_per_iter = std::int64_t(global_batch_) * T;
  Exec exec;

  // No host synchronisation from here to the readback of the loss and the gradient norm: the
  // kernels queue up on the device, allocations were all made in the first iteration.
  model_->params->zero_grads();
  Kokkos::deep_copy(exec, scalars_, 0.0);
  // bf16: the GEMMs' copies of this iteration's masters (after initialisation, a checkpoint load
  // or the last optimizer step, whichever changed them last).
  model_->params->refresh_bf16();
  const std::int64_t first = sample_base_ + std::int64_t(it - first_iteration_) * global_batch_ +
                             std::int64_t(mesh_.dp_rank) * (global_batch_ / dp);
  model_->pipeline->run(*data_, first, microbatches_, 1.0f / static_cast<float>(tokens_per_iter),
                 [this](int l) {
                   const ProfilingRegion region("kformer::unit_done");  // a unit's gradients go to the buckets
                   sync_->unit_done(l);
                 });
  const double compute_ms = model_->pipeline->compute_ms;
  double busy_ms = compute_ms;
  for (const auto& s : model_->stages) {
    r.forward_ms += s->forward_ms;
    r.backward_ms += s->backward_ms;
  }
  double stretch_ms = 0;
  if (cfg_.straggler.rank == world_.rank() && cfg_.straggler.slowdown > 1) {
    // Stretch this rank's compute by waiting: the same numbers, later.
    const double extra = (cfg_.straggler.slowdown - 1) * busy_ms;
    const auto slept_from = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(extra));
    stretch_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - slept_from).count();
    busy_ms += extra;
  }
  {
    const ProfilingRegion region("kformer::grad_sync");
    sync_->finish();
    sync_tied_embedding();
  }
  if (after_backward) after_backward(it);

  {
    // The loss over the global token count: only the last stage has it; TP ranks hold the same
    // sum. The squared gradient norm: one fused reduction here, summed over the world. Both stay
    // on the device until the one copy that brings them to the host (the log line, the NaN check
    // and the clipping factor need them there).
    const ProfilingRegion region("kformer::grad_norm");
    const auto loss = Kokkos::subview(scalars_, std::make_pair(0, 1));
    const auto sq = Kokkos::subview(scalars_, std::make_pair(2, 3));
    optimizer_->grad_sq_local(exec, sq);
    if (mesh_.pp->size() > 1) comm::allreduce(*mesh_.pp, loss, comm::ReduceOp::sum);
    if (mesh_.dp->size() > 1) comm::allreduce(*mesh_.dp, loss, comm::ReduceOp::sum);
    if (world_.size() > 1) comm::allreduce(world_, sq, comm::ReduceOp::sum);
    Kokkos::deep_copy(scalars_host_, scalars_);
  }
  r.loss = scalars_host_(0) / double(tokens_per_iter);
  r.grad_norm = std::sqrt(scalars_host_(2));

  Kokkos::Timer opt_timer;
  r.optimizer_start_us = comm::TraceLog::now_us();
  const bool finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (finite) {
    const ProfilingRegion region("kformer::optimizer");
    const double clip = cfg_.train.grad_clip;
    optimizer_->step(it, clip > 0 && r.grad_norm > clip ? clip / (r.grad_norm + 1e-6) : 1.0);
    // The step's one fence: the optimizer's time and the iteration's elapsed time are the device's.
    kernels::fence(exec, "kformer::optimizer_end");
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
  r.lr = optimizer_->learning_rate(it);
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
  r.comm_exposed_ms += sync_->exposed_ms() + model_->pipeline->group_wait_ms;
  // Every rank's busy time, bubble and communication time, for the straggler and bubble figures,
  // the stop signal it may have received, and the compute a straggler stretched with what it slept:
  // one all-reduce of a (6, world) table in which each rank fills its own column, so every rank
  // learns of a signal after the same iteration.
  const int n = world_.size(), me = world_.rank();
  std::vector<double> table(6 * std::size_t(n), 0.0);
  table[me] = busy_ms;
  table[n + me] = r.pipeline_wall_ms > 0 ? 1.0 - r.pipeline_compute_ms / r.pipeline_wall_ms : 0.0;
  table[2 * n + me] = r.comm_total_ms;
  hold_after_signal_for_test();
  table[3 * n + me] = stop_signal();
  table[4 * n + me] = compute_ms;
  table[5 * n + me] = stretch_ms;
  reduce_.allreduce(world_, table, comm::ReduceOp::sum);
  r.rank_compute_ms.assign(table.begin() + 4 * n, table.begin() + 5 * n);
  r.rank_stretch_ms.assign(table.begin() + 5 * n, table.begin() + 6 * n);
  r.rank_busy_ms.assign(table.begin(), table.begin() + n);
  r.rank_bubble.assign(table.begin() + n, table.begin() + 2 * n);
  r.rank_comm_ms.assign(table.begin() + 2 * n, table.begin() + 3 * n);
  for (int k = 0; k < n && r.stop_signal == 0; ++k)
    if (table[3 * n + k] != 0) r.stop_signal = int(table[3 * n + k]), r.stop_rank = k;

  r.elapsed_s = step_timer.seconds();
  const TrainingPosition after = position(it);
  r.consumed_samples = after.consumed_samples;
  r.consumed_tokens = after.consumed_tokens;
  r.samples_per_s = global_batch_ / r.elapsed_s;
  r.tokens_per_s = tokens_per_iter / r.elapsed_s;
  r.tflops_per_rank = model_flops_rank_ / r.elapsed_s / 1e12;
  return r;
}

}  // namespace kformer
