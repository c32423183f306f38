// The iteration's phases (see step_program.hpp).
#include "train/step_program.hpp"

#include "comm/views.hpp"
#include "convert.hpp"
#include "kokkos_compat.hpp"
#include "platform/profiling_region.hpp"

namespace kformer {

bool holds_tied_embedding(const RunPlan& plan, RankPlace at) {
  const int pp = plan.settings.parallel.pp, S = static_cast<int>(plan.chunks.size());
  return plan.shape.gpt && pp > 1 && (at.pp == 0 || (S - 1) % pp == at.pp);
}

int world_rank(const ParallelSettings& par, RankPlace at) { return (at.pp * par.dp + at.dp) * par.tp + at.tp; }

StepProgram::StepProgram(const RunPlan& plan, RankModel& model, RankPlace at, StepGroups groups)
    : plan_(plan), model_(model), groups_(groups) {
  const RunSettings& cfg = plan.settings;
  scalars_ = scratch<double*>("kformer::step_scalars", 3);
  scalars_host_ = Kokkos::create_mirror_view(scalars_);
  for (auto& st : model_.stages)
    if (st->chunk().last()) st->set_loss_sums(Kokkos::subview(scalars_, std::make_pair(0, 2)));
  // The last stage's copy of the tied table is left out of the gradient norm.
  const bool mirror = groups.tied && at.pp != 0;
  const OptimizerSettings os{cfg.train.lr, cfg.train.weight_decay, cfg.train.warmup, cfg.train.steps, cfg.parallel.zero};
  optimizer_ = std::make_unique<Optimizer>(*model_.params, os, groups.mesh.dp, at.tp, mirror ? -1 : Optimizer::kNoMirror);
  sync_ = std::make_unique<GradSync>(*model_.params, groups.mesh.dp, plan.numerics);
}

void StepProgram::prepare() {
  // No host synchronisation from here to the readback of the loss and the gradient norm: the
  // kernels queue up on the device, allocations were all made in the first iteration.
  const ProfilingRegion region("kformer::prepare");
  model_.params->zero_grads();
  kernels::fill(Exec(), scalars_, 0.0);
  // bf16: the GEMMs' copies of this iteration's masters (after initialisation, a checkpoint load
  // or the last optimizer step, whichever changed them last).
  model_.params->refresh_bf16();
}

void StepProgram::pipeline(const DataSource& data, std::int64_t first_sample, float grad_scale) {
  model_.pipeline->run(data, first_sample, plan_.settings.parallel.microbatches, grad_scale,
                       [this](int l) { unit_done(l); });
}

void StepProgram::unit_done(int layer) {
  const ProfilingRegion region("kformer::unit_done");
  sync_->unit_done(layer);
}

void StepProgram::grad_sync() {
  const ProfilingRegion region("kformer::grad_sync");
  sync_->finish();
  if (!groups_.tied) return;
  // The tied table's gradient, summed over its two stages. Under ZeRO-2/3 each rank holds the
  // reduced gradient of its own shard only; both stages shard the unit alike, so the shards line up.
  const ParamStore& p = *model_.params;
  std::size_t unit = 0;
  while (p.units()[unit].layer != -1) ++unit;
  const int zero = plan_.settings.parallel.zero;
  const std::int64_t size = p.units()[unit].size, n = zero >= 2 ? size / p.shards() : size;
  if (p.grads_bf16()) {  // the bf16 gradient buffer (ParamStore::grads_bf16)
    kernels::bf16* g = zero >= 2 ? p.shard_grads16(unit) : p.grads16().data() + p.units()[unit].offset;
    groups_.tied->allreduce(g, g, n, comm::DType::bf16, comm::ReduceOp::sum);
    return;
  }
  float* g = zero >= 2 ? p.shard_grads(unit) : p.grads().data() + p.units()[unit].offset;
  groups_.tied->allreduce(g, g, n, comm::DType::f32, comm::ReduceOp::sum);
}

StepSums StepProgram::grad_norm() {
  // The loss over the global token count: only the last stage has it; TP ranks hold the same
  // sum. The squared gradient norm: one fused reduction here, summed over the world. Both stay
  // on the device until the one copy that brings them to the host (the log line, the NaN check
  // and the clipping factor need them there).
  const ProfilingRegion region("kformer::grad_norm");
  const auto loss = Kokkos::subview(scalars_, std::make_pair(0, 1));
  const auto sq = Kokkos::subview(scalars_, std::make_pair(2, 3));
  optimizer_->grad_sq_local(Exec(), sq);
  const RankGroups& g = groups_.mesh;
  if (g.pp && g.pp->size() > 1) comm::allreduce(*g.pp, loss, comm::ReduceOp::sum);
  if (g.dp && g.dp->size() > 1) comm::allreduce(*g.dp, loss, comm::ReduceOp::sum);
  if (groups_.world->size() > 1) comm::allreduce(*groups_.world, sq, comm::ReduceOp::sum);
  kernels::transfer(scalars_host_, scalars_);
  if (kernels::described()) return {};
  return {scalars_host_(0), scalars_host_(2)};
}

void StepProgram::optimizer(int iteration, double clip_scale) {
  const ProfilingRegion region("kformer::optimizer");
  optimizer_->step(iteration, clip_scale);
  // The step's one fence: the optimizer's time and the iteration's elapsed time are the device's.
  kernels::fence(Exec(), "kformer::optimizer_end");
}

void StepProgram::metrics(std::vector<double>& table) {
  const ProfilingRegion region("kformer::metrics");
  reduce_.allreduce(*groups_.world, table, comm::ReduceOp::sum);
}

}  // namespace kformer
