// The step's work, described (see step_work.hpp).
#include "train/step_work.hpp"

#include <algorithm>

#include "comm/described_comm.hpp"
#include "io/data.hpp"
#include "parallel/schedule.hpp"
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

// The groups of the rank at `at`, recording into whichever log is current.
struct DescribedGroups {
  WorkLog* log = nullptr;
  std::unique_ptr<comm::Communicator> tp, dp, pp, world, tied;
  DescribedGroups(const RunPlan& plan, RankPlace at) {
    const ParallelSettings& par = plan.settings.parallel;
    const auto record = [this](const comm::Op& op, const std::string& group, int size) { log->comm(op, group, size); };
    tp = std::make_unique<comm::DescribedComm>(par.tp, at.tp, "tp", record);
    dp = std::make_unique<comm::DescribedComm>(par.dp, at.dp, "dp", record);
    pp = std::make_unique<comm::DescribedComm>(par.pp, at.pp, "pp", record);
    world = std::make_unique<comm::DescribedComm>(par.tp * par.dp * par.pp, world_rank(par, at), "world", record);
    if (holds_tied_embedding(plan, at))
      tied = std::make_unique<comm::DescribedComm>(2, at.pp == 0 ? 0 : 1, "tied-embedding", record);
  }
  RankGroups groups() const { return {tp.get(), dp.get(), pp.get()}; }
  StepGroups step_groups() const { return {groups(), world.get(), tied.get()}; }
};

// The rank at `at` as the trainer builds it (its model and step program), over recording groups,
// its set-up's calls described into `setup`.
struct DescribedRank {
  DescribedGroups groups;
  std::unique_ptr<RankModel> model;
  std::unique_ptr<StepProgram> program;
  DescribedRank(const RunPlan& plan, RankPlace at, WorkLog& setup) : groups(plan, at) {
    const kernels::Describing describing(setup);
    groups.log = &setup;
    model = build_rank_model(plan, at, groups.groups());
    program = std::make_unique<StepProgram>(plan, *model, at, groups.step_groups());
  }
};

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
  const kernels::Describing describing(log);
  r.groups.log = &log;
  const auto data = make_data_source(plan.settings.data_source, plan.shape.vocab, plan.settings.train.seed);
  r.program->prepare();  // Trainer::iterate's phases, in its order
  r.program->pipeline(*data, 0, 1.0f);
  after_pipeline(*r.program, r.groups.world->size());
  return log;
}

PhaseLogs describe_phases(const RunPlan& plan, RankPlace at) {
  PhaseLogs out;
  WorkLog setup;
  DescribedRank r(plan, at, setup);
  const auto into = [&](WorkLog& log, const auto& f) {
    const kernels::Describing scope(log);
    r.groups.log = &log;
    f();
  };
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
