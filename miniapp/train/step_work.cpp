// The step's work, described (see step_work.hpp).
#include "train/step_work.hpp"

#include <algorithm>

#include "io/data.hpp"
#include "parallel/schedule.hpp"
#include "train/described_rank.hpp"
#include "train/rank_table.hpp"
#include "train/step_program.hpp"

namespace kformer {

void WorkLog::kernel(const kernels::KernelCall& call) {
  WorkEntry e;
  e.call = call;
  entries.push_back(e);
}

void WorkLog::region(const char* name, bool begin) {
  WorkEntry e;
  e.kind = begin ? WorkEntry::Kind::region_begin : WorkEntry::Kind::region_end;
  e.group = name;
  entries.push_back(e);
}

void WorkLog::mark(const char* what, int layer) {
  if (std::string(what) != "require") return;
  WorkEntry e;
  e.kind = WorkEntry::Kind::require;
  e.layer = layer;
  entries.push_back(e);
}

void WorkLog::comm(const comm::Op& op, const std::string& group, int size) {
  WorkEntry e;
  e.kind = WorkEntry::Kind::comm;
  e.op = op.kind;
  e.type = op.type;
  e.payload = op.site.payload;
  e.bytes = double(comm::op_bytes(op, size));
  e.group = group;
  e.group_size = size;
  entries.push_back(e);
}

void WorkLog::unit_done(int layer) {
  WorkEntry e;
  e.kind = WorkEntry::Kind::unit_done;
  e.layer = layer;
  entries.push_back(e);
}

namespace {

// The phases after the pipeline, in Trainer::iterate's order; the described loss and norm are
// finite and not clipped.
void after_pipeline(StepProgram& program, int world_size) {
  program.grad_sync();
  program.grad_norm();
  program.optimizer(1, 1.0);
  RankTable table(world_size, 0, RankColumn());
  program.metrics(table.values());
}

}  // namespace

WorkLog describe_iteration(const RunPlan& plan, RankPlace at) {
  WorkLog setup, log;  // the set-up's calls (nothing is launched there, but the store's would show) stay out
  DescribedRank r(plan, at, setup);
  describe_iteration_of(plan, r, log);
  return log;
}

void describe_iteration_of(const RunPlan& plan, DescribedRank& r, WorkLog& log) {
  const kernels::DescribingAs as(plan.code_path);
  const kernels::Describing describing(log);
  r.groups.log = &log;
  const auto data = make_data_source(plan.settings.data_source, plan.shape.vocab, plan.settings.train.seed);
  r.program->prepare();  // Trainer::iterate's phases, in its order
  r.program->pipeline(*data, 0, 1.0f);
  after_pipeline(*r.program, r.groups.world->size());
}

PhaseLogs describe_phases(const RunPlan& plan, RankPlace at) {
  PhaseLogs out;
  const kernels::DescribingAs as(plan.code_path);
  WorkLog setup;
  DescribedRank r(plan, at, setup);
  const auto into = [&](WorkLog& log, const auto& f) {
    const kernels::Describing scope(log);
    r.groups.log = &log;
    f();
  };
  into(out.before, [&] { r.program->prepare(); });
  std::vector<int> layers;  // as the backward completes them: the head's unit first, the embedding's last
  for (const ParamUnit& u : r.model->params->units())
    if (std::find(layers.begin(), layers.end(), u.layer) == layers.end()) layers.push_back(u.layer);
  std::sort(layers.rbegin(), layers.rend());
  for (int l : layers) {
    WorkLog posted;
    into(posted, [&] { r.program->unit_done(l); });
    for (const WorkEntry& e : posted.entries)
      if (e.kind == WorkEntry::Kind::comm && e.group == "dp") out.buckets[l] += e.bytes;
  }
  into(out.after, [&] { after_pipeline(*r.program, r.groups.world->size()); });
  return out;
}

ChunkLog describe_chunk(const RunPlan& plan, int chunk, bool last_micro) {
  ChunkLog out;
  const kernels::DescribingAs as(plan.code_path);
  WorkLog setup;
  const kernels::Describing describing(setup);
  const int pp = plan.settings.parallel.pp;
  DescribedGroups g(plan, {chunk % pp, 0, 0});
  g.log = &setup;
  const auto model = build_rank_model(plan, {chunk % pp, 0, 0}, g.groups());
  Stage& st = *model->stages[std::size_t(chunk / pp)];
  const BlockDims& d = st.dims();
  const std::vector<std::int32_t> tokens(std::size_t(d.B) * (d.T + 1), 0);
  const bool hook = last_micro;
  const auto run_into = [&](WorkLog& log, const auto& f) {
    const kernels::Describing scope(log);
    g.log = &log;
    f();
  };
  WorkLog* current = nullptr;
  const std::function<void(int)> done = [&](int l) { current->unit_done(l); };
  st.input(0);
  run_into(out.forward, [&] { st.forward(0, tokens, 1.0f); });
  if (splits_backward(plan.settings.parallel.schedule)) {
    run_into(out.backward, [&] { st.backward_input(0); });
    current = &out.weight;
    run_into(out.weight, [&] { st.backward_weight(0, hook ? done : std::function<void(int)>()); });
  } else {
    current = &out.backward;
    run_into(out.backward, [&] { st.backward(0, hook ? done : std::function<void(int)>()); });
  }
  st.release(0);
  return out;
}

}  // namespace kformer
