// The step's work, described (see step_work.hpp).
#include "train/step_work.hpp"

#include "comm/described_comm.hpp"
#include "io/data.hpp"
#include "parallel/schedule.hpp"

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
  std::unique_ptr<comm::Communicator> tp, dp, pp;
  DescribedGroups(const ParallelSettings& par, RankPlace at) {
    const auto record = [this](const comm::Op& op, const std::string& group, int size) { log->comm(op, group, size); };
    tp = std::make_unique<comm::DescribedComm>(par.tp, at.tp, "tp", record);
    dp = std::make_unique<comm::DescribedComm>(par.dp, at.dp, "dp", record);
    pp = std::make_unique<comm::DescribedComm>(par.pp, at.pp, "pp", record);
  }
  RankGroups groups() const { return {tp.get(), dp.get(), pp.get()}; }
};

}  // namespace

WorkLog describe_iteration(const RunPlan& plan, RankPlace at, kernels::GemmImpl gemm) {
  WorkLog log;
  const kernels::Describing describing(log);
  DescribedGroups g(plan.settings.parallel, at);
  g.log = &log;
  const auto model = build_rank_model(plan, at, g.groups(), gemm);
  log.entries.clear();  // the set-up (nothing is launched there, but the store's calls would show)
  const auto data = make_data_source(plan.settings.data_source, plan.shape.vocab, plan.settings.train.seed);
  model->pipeline->run(*data, 0, plan.settings.parallel.microbatches, 1.0f, [&](int l) { log.unit_done(l); });
  return log;
}

ChunkLog describe_chunk(const RunPlan& plan, int chunk, bool last_micro, kernels::GemmImpl gemm) {
  ChunkLog out;
  WorkLog setup;
  const kernels::Describing describing(setup);
  const int pp = plan.settings.parallel.pp;
  DescribedGroups g(plan.settings.parallel, {chunk % pp, 0, 0});
  g.log = &setup;
  const auto model = build_rank_model(plan, {chunk % pp, 0, 0}, g.groups(), gemm);
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
