// The training loop (see trainer.hpp).
#include "trainer.hpp"

#include <Kokkos_Timer.hpp>

#include <chrono>
#include <cmath>
#include <iostream>
#include <thread>

#include "errors.hpp"

namespace kformer {

Trainer::Trainer(const Config& cfg, comm::Communicator& world, comm::Mesh& mesh,
                 std::shared_ptr<comm::TraceLog> trace)
    : cfg_(cfg), world_(world), mesh_(mesh), trace_(std::move(trace)), shape_(model_shape(cfg)),
      micro_batch_(cfg.i32("train.micro_batch")), seq_len_(cfg.i32("train.seq_len")),
      global_batch_(cfg.i32("train.global_batch")), microbatches_(cfg.i32("parallel.microbatches")) {
  const int zero = cfg.i32("parallel.zero");
  params_ = std::make_unique<ParamStore>(model_params(shape_), shape_.tp, mesh.tp_rank, mesh.dp.get(), zero);
  params_->initialize(static_cast<std::uint64_t>(cfg.i64("train.seed")));
  KernelChoice k{kernels::parse_gemm_impl(cfg.str("kernels.gemm")),
                 kernels::attention_kind_from_string(cfg.str("kernels.attention"))};
  model_ = std::make_unique<Model>(shape_, micro_batch_, seq_len_, k, *params_, mesh.tp.get());
  OptimizerSettings os{cfg.f64("train.lr"), cfg.f64("train.weight_decay"), cfg.i32("train.warmup"),
                       cfg.i32("train.steps"), zero};
  optimizer_ = std::make_unique<Optimizer>(*params_, os, mesh.dp.get(), mesh.tp_rank);
  sync_ = std::make_unique<GradSync>(*params_, mesh.dp.get(), zero);
  data_ = make_data_source(cfg.str("data.source"), shape_.vocab, static_cast<std::uint64_t>(cfg.i64("train.seed")));
}

void Trainer::run(int first_iteration) {
  const int steps = cfg_.i32("train.steps"), log_every = cfg_.i32("output.log_every");
  for (int it = first_iteration; it <= steps; ++it) {
    IterationRecord r = iterate(it);
    records_.push_back(r);
    if (world_.rank() == 0 && (it % log_every == 0 || it == steps)) std::cout << format_log_line(r) << std::endl;
    if (nan_in_a_row_ >= cfg_.i64("train.max_nan"))
      throw std::runtime_error("the loss or gradient norm was not finite for " + std::to_string(nan_in_a_row_) +
                               " iterations in a row (train.max_nan): lower train.lr or raise train.warmup");
  }
}

IterationRecord Trainer::iterate(int it) {
  Kokkos::Timer step_timer;
  if (trace_) trace_->clear();
  IterationRecord r;
  r.iteration = it;
  r.total = cfg_.i64("train.steps");
  r.global_batch = global_batch_;
  const int T = seq_len_, dp = mesh_.shape.dp;
  const std::int64_t tokens_per_iter = std::int64_t(global_batch_) * T;
  const float grad_scale = 1.0f / static_cast<float>(tokens_per_iter);
  const bool straggler = cfg_.i64("straggler.rank") == world_.rank();
  const double slowdown = cfg_.f64("straggler.slowdown");

  params_->zero_grads();
  double loss_sum = 0, busy_ms = 0;
  std::vector<std::int32_t> tokens(std::size_t(micro_batch_) * (T + 1));
  const std::int64_t first = std::int64_t(it - 1) * global_batch_ + std::int64_t(mesh_.dp_rank) * (global_batch_ / dp);
  for (int m = 0; m < microbatches_; ++m) {
    data_->fill(first + std::int64_t(m) * micro_batch_, micro_batch_, T, tokens.data());
    const bool last = m == microbatches_ - 1;
    loss_sum += model_->forward_backward(tokens, grad_scale,
                                         last ? std::function<void(int)>([this](int l) { sync_->unit_done(l); })
                                              : std::function<void(int)>());
    double compute = model_->last_forward_ms + model_->last_backward_ms;
    if (straggler && slowdown > 1) {  // stretch this rank's compute by waiting: same numbers, later
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>((slowdown - 1) * compute));
      compute *= slowdown;
    }
    r.forward_ms += model_->last_forward_ms;
    r.backward_ms += model_->last_backward_ms;
    busy_ms += compute;
  }
  sync_->finish();
  if (after_backward) after_backward(it);

  // Loss over the global token count: the TP ranks hold the same sum, the DP ranks add up.
  if (mesh_.dp->size() > 1) mesh_.dp->allreduce(&loss_sum, &loss_sum, 1, comm::DType::f64, comm::ReduceOp::sum);
  r.loss = loss_sum / double(tokens_per_iter);
  double sq = optimizer_->grad_sq_local();
  world_.allreduce(&sq, &sq, 1, comm::DType::f64, comm::ReduceOp::sum);
  r.grad_norm = std::sqrt(sq);

  Kokkos::Timer opt_timer;
  const bool finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (finite) {
    const double clip = cfg_.f64("train.grad_clip");
    const double scale = clip > 0 && r.grad_norm > clip ? clip / (r.grad_norm + 1e-6) : 1.0;
    optimizer_->step(it, scale);
    nan_in_a_row_ = 0;
  } else {
    ++skipped_;
    ++nan_;
    ++nan_in_a_row_;
  }
  r.optimizer_ms = opt_timer.seconds() * 1e3;
  busy_ms += r.optimizer_ms;
  r.skipped = !finite;
  r.skipped_total = skipped_;
  r.nan_total = nan_;
  r.lr = learning_rate({cfg_.f64("train.lr"), 0, cfg_.i32("train.warmup"), cfg_.i32("train.steps"), 0}, it);

  // Per-rank busy times, gathered for the straggler figures.
  r.rank_busy_ms.assign(world_.size(), 0.0);
  r.rank_busy_ms[world_.rank()] = busy_ms;
  world_.allreduce(r.rank_busy_ms.data(), r.rank_busy_ms.data(), r.rank_busy_ms.size(), comm::DType::f64,
                   comm::ReduceOp::sum);
  // Communication: total = time with a call in flight; exposed = time the caller waited (the
  // blocking calls, TP's all-reduces among them, and the wait for the data-parallel buckets).
  if (trace_) {
    r.comm_total_ms = trace_->busy_us() / 1e3;
    for (const auto& rec : trace_->records())
      if (rec.blocking && rec.end_us >= 0) r.comm_exposed_ms += (rec.end_us - rec.start_us) / 1e3;
  }
  r.comm_exposed_ms += sync_->exposed_ms();
  r.rank_comm_ms.assign(world_.size(), 0.0);
  r.rank_comm_ms[world_.rank()] = r.comm_total_ms;
  world_.allreduce(r.rank_comm_ms.data(), r.rank_comm_ms.data(), r.rank_comm_ms.size(), comm::DType::f64,
                   comm::ReduceOp::sum);

  r.elapsed_s = step_timer.seconds();
  r.consumed_samples = std::int64_t(it) * global_batch_;
  r.consumed_tokens = r.consumed_samples * T;
  r.samples_per_s = global_batch_ / r.elapsed_s;
  r.tokens_per_s = tokens_per_iter / r.elapsed_s;
  r.tflops_per_rank = model_->flops().total() * microbatches_ / r.elapsed_s / 1e12;
  return r;
}

}  // namespace kformer
