// The step's work list against a run, call by call (issue 25): on a matrix of features (gpt and
// llama, fp32 and bf16, recompute none/selective/full, sequence parallelism, TP 1 and 2, ZeRO 0
// and 3, a bf16 gradient reduce, pipeline schedules), each rank trains one iteration while the
// Kokkos Tools callbacks and a recording decorator around its communicator see what every phase
// of its step program does (prepare, pipeline, grad_sync, grad_norm, optimizer, metrics:
// train/step_program.hpp): the kernel calls (the regions kformer::kernel::NAME), the regions, the
// communication calls with their group, kind, type and bytes, and every kernel launch and deep
// copy, which must each happen inside a described call. Then the same rank's iteration is
// described (train/step_work.hpp) and the two lists must be the same, entry by entry; and the
// lists predict costs (describe_chunk) must be the described iteration's own calls of each chunk.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "comm/forwarding_comm.hpp"
#include "comm/mesh.hpp"
#include "settings/read_settings.hpp"
#include "test_env.hpp"
#include "train/step_work.hpp"
#include "train/trainer.hpp"
#include "train/make_plan.hpp"

using namespace kformer;

namespace {

namespace kt = Kokkos::Tools::Experimental;

// What a run showed inside its iteration (the region kformer::step that Trainer::iterate opens:
// its phases and anything the trainer did between them), as lines comparable with a described
// list's (normalise() below).
struct Observed {
  int phase_depth = 0;   // inside kformer::step
  int kernel_depth = 0;  // inside a kformer::kernel:: region
  std::vector<std::string> regions;  // the open regions' names
  std::vector<std::string> lines;
  std::vector<std::string> stray;    // launches outside any described call
  bool inside() const { return phase_depth > 0; }
};
Observed* g_seen = nullptr;

const std::string kKernel = "kformer::kernel::";

std::string comm_line(const std::string& group, int size, comm::OpKind op, comm::DType type, double bytes) {
  std::ostringstream o;
  o << "comm " << group << '(' << size << ") " << comm::op_name(op) << ' ' << comm::dtype_name(type) << ' ' << bytes
    << 'B';
  return o.str();
}

void on_push(const char* name) {
  Observed& s = *g_seen;
  const std::string n = name;
  s.regions.push_back(n);
  if (n == "kformer::step") ++s.phase_depth;
  if (!s.inside() || n == "kformer::step") return;
  if (n.rfind(kKernel, 0) == 0) {
    if (s.kernel_depth++ == 0) s.lines.push_back("kernel " + n.substr(kKernel.size()));
  } else {
    s.lines.push_back("region+ " + n);
  }
}

void on_pop() {
  Observed& s = *g_seen;
  const std::string n = s.regions.back();
  s.regions.pop_back();
  if (n == "kformer::step") --s.phase_depth;
  if (s.inside()) {
    if (n.rfind(kKernel, 0) == 0) --s.kernel_depth;
    else s.lines.push_back("region- " + n);
  }
}

void on_launch(const char* label, std::uint32_t, std::uint64_t*) {
  Observed& s = *g_seen;
  if (s.inside() && s.kernel_depth == 0) s.stray.push_back(std::string("kernel ") + label);
}

void on_deep_copy(Kokkos::Tools::SpaceHandle, const char* dst, const void*, Kokkos::Tools::SpaceHandle,
                  const char* src, const void*, std::uint64_t) {
  Observed& s = *g_seen;
  if (s.inside() && s.kernel_depth == 0) s.stray.push_back(std::string("deep_copy ") + dst + " <- " + src);
}

// Records every call that reaches the backend, with its group's name, into g_seen.
class Recorded final : public comm::ForwardingCommunicator {
 public:
  explicit Recorded(std::unique_ptr<comm::Communicator> inner) : ForwardingCommunicator(std::move(inner)) {}
  std::string backend() const override { return "recorded(" + inner_->backend() + ")"; }
  std::unique_ptr<comm::Communicator> split(int color, int key) override {
    return std::make_unique<Recorded>(inner_->split(color, key));
  }
  void set_name(const std::string& name) override {
    name_ = name;
    inner_->set_name(name);
  }
  void run(const comm::Op& op) override {
    note(op);
    inner_->run(op);
  }
  comm::Request start(const comm::Op& op) override {
    note(op);
    return inner_->start(op);
  }
  comm::Request start_group(const std::vector<comm::Op>& ops) override {
    for (const auto& op : ops) note(op);
    return inner_->start_group(ops);
  }

 private:
  void note(const comm::Op& op) const {
    if (g_seen && g_seen->inside())
      g_seen->lines.push_back(comm_line(name_, size(), op.kind, op.type, double(comm::op_bytes(op, size()))));
  }
  std::string name_;
};

// A described list as the run's lines: top-level kernel calls by name, regions, communication
// calls, units done (a chunk's list marks them; a described iteration has the region
// kformer::unit_done there); requires are not calls: the store's gathers are the comm lines.
std::vector<std::string> normalise(const std::vector<WorkEntry>& entries) {
  std::vector<std::string> out;
  for (const WorkEntry& e : entries) {
    switch (e.kind) {
      case WorkEntry::Kind::kernel: out.push_back(std::string("kernel ") + e.call.name); break;
      case WorkEntry::Kind::comm: out.push_back(comm_line(e.group, e.group_size, e.op, e.type, e.bytes)); break;
      case WorkEntry::Kind::region_begin: out.push_back("region+ " + e.group); break;
      case WorkEntry::Kind::region_end: out.push_back("region- " + e.group); break;
      case WorkEntry::Kind::unit_done: out.push_back("unit_done"); break;
      case WorkEntry::Kind::require: break;
    }
  }
  return out;
}

// The first entry where two lists part, with the lines around it.
std::string first_difference(const std::vector<std::string>& run, const std::vector<std::string>& described) {
  std::size_t i = 0;
  while (i < run.size() && i < described.size() && run[i] == described[i]) ++i;
  if (i == run.size() && i == described.size()) return "";
  std::ostringstream o;
  o << "the run and the described list part at entry " << i << " (run " << run.size() << " entries, described "
    << described.size() << ")\n";
  const std::size_t from = i >= 4 ? i - 4 : 0;
  for (std::size_t j = from; j < i + 4; ++j)
    o << (j == i ? "> " : "  ") << j << "  run: " << (j < run.size() ? run[j] : "(end)")
      << "  |  described: " << (j < described.size() ? described[j] : "(end)") << '\n';
  return o.str();
}

// Kernels and TP calls only: what predict costs of a chunk (its data-parallel and pipeline traffic
// the simulator places itself; a unit done is its mark, the buckets it posts are the simulator's).
// What a ZeRO-3 require computes depends on whether the unit is still gathered (which the
// simulator tracks itself), and which gradient buffers land when on the buffers' history: the
// contents of those regions are left out too.
std::vector<std::string> chunk_calls(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  int skip = 0;
  for (const auto& l : lines) {
    if (l == "region+ kformer::unit_done" && !skip) out.push_back("unit_done");
    if (l == "region+ kformer::require" || l == "region+ kformer::grads_landed" || l == "region+ kformer::unit_done") ++skip;
    if (l == "region- kformer::require" || l == "region- kformer::grads_landed" || l == "region- kformer::unit_done") --skip;
    if (!skip && (l.rfind("kernel ", 0) == 0 || l.rfind("comm tp", 0) == 0 || l == "unit_done")) out.push_back(l);
  }
  return out;
}

// The stage calls of a described iteration's pipeline, each as its lines: a region
// kformer::forward, backward, backward_input or backward_weight at the pipeline's top level; the
// last chunk's forward call ends with the region kformer::head_backward, which belongs to it.
std::vector<std::vector<std::string>> stage_calls(const std::vector<std::string>& lines) {
  std::vector<std::vector<std::string>> calls;
  int depth = 0;
  bool in_pipeline = false;
  for (const auto& l : lines) {
    if (l == "region+ kformer::pipeline" || l == "region- kformer::pipeline") {
      in_pipeline = l[6] == '+';
      continue;
    }
    if (!in_pipeline) continue;
    const bool begin = l.rfind("region+ ", 0) == 0, end = l.rfind("region- ", 0) == 0;
    if (begin && depth++ == 0 && l != "region+ kformer::head_backward") calls.emplace_back();
    if (depth > 0) calls.back().push_back(l);
    if (end) --depth;
  }
  return calls;
}

void expect_work_list_matches(const std::vector<std::string>& overrides) {
  auto inner = test::world();
  const int P = inner->size();
  std::vector<std::string> given = {"train.steps=1", "kernels.gemm=native", "output.log_every=100"};
  given.insert(given.end(), overrides.begin(), overrides.end());
  const RunPlan plan = make_plan(load_settings(KFORMER_SOURCE_DIR "/input/tiny.yaml", given, P));
  std::string what;
  for (const auto& o : overrides) what += o + " ";
  const ParallelSettings& par = plan.settings.parallel;
  ASSERT_EQ(par.dp * par.pp * par.tp, P) << what;

  Recorded world(std::move(inner));
  comm::Mesh mesh = comm::build_mesh(world, {par.dp, par.pp, par.tp});
  Observed seen;
  {
    Trainer trainer(plan, world, mesh, nullptr);
    g_seen = &seen;
    const kt::EventSet before = kt::get_callbacks();
    kt::EventSet events = before;
    events.push_region = on_push;
    events.pop_region = on_pop;
    events.begin_parallel_for = events.begin_parallel_reduce = events.begin_parallel_scan = on_launch;
    events.begin_deep_copy = on_deep_copy;
    kt::set_callbacks(events);
    trainer.run();
    kt::set_callbacks(before);
    g_seen = nullptr;
  }
  const RankPlace at{mesh.pp_rank, mesh.tp_rank, mesh.dp_rank};
  const std::vector<std::string> described = normalise(describe_iteration(plan, at).entries);
  ASSERT_GT(described.size(), 10u) << what;
  EXPECT_TRUE(seen.stray.empty()) << what << "launched inside the iteration outside any described kernel call: "
                                  << seen.stray.front() << " (" << seen.stray.size() << " in all)";
  const std::string diff = first_difference(seen.lines, described);
  EXPECT_EQ(diff, "") << what << "on rank " << world.rank() << '\n' << diff;

  // predict's lists (describe_chunk) against the described iteration's stage calls: micro-batch 0
  // and the last of each chunk this rank holds, in the schedule's order.
  const auto calls = stage_calls(described);
  const auto& actions = plan.schedule[mesh.pp_rank];
  ASSERT_EQ(calls.size(), actions.size()) << what << "one stage call per action of the schedule";
  const int m = par.microbatches;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.micro != 0 && a.micro != m - 1) continue;
    const ChunkLog chunk = describe_chunk(plan, a.chunk, a.micro == m - 1);
    const WorkLog& log = a.phase == Phase::forward ? chunk.forward
                         : a.phase == Phase::weight ? chunk.weight : chunk.backward;
    const std::string d = first_difference(chunk_calls(calls[i]), chunk_calls(normalise(log.entries)));
    EXPECT_EQ(d, "") << what << "chunk " << a.chunk << " micro-batch " << a.micro << " phase " << int(a.phase)
                     << " on rank " << world.rank() << '\n' << d;
  }
  std::cout << what << "rank " << world.rank() << ": " << described.size() << " entries, " << calls.size()
            << " stage calls, the same in the run" << std::endl;
}

int ranks() { return test::world()->size(); }

}  // namespace

TEST(StepWork, OneRankFeatures) {
  if (ranks() != 1) GTEST_SKIP() << "one rank";
  expect_work_list_matches({});
  expect_work_list_matches({"model.family=llama", "model.n_kv_heads=2", "train.precision=bf16", "train.recompute=selective"});
  expect_work_list_matches({"train.precision=bf16", "train.recompute=full"});
  expect_work_list_matches({"model.family=llama", "model.n_kv_heads=2", "kernels.attention=fused", "train.recompute=full"});
}

TEST(StepWork, TwoRanks) {
  if (ranks() != 2) GTEST_SKIP() << "two ranks";
  expect_work_list_matches({"parallel.tp=2"});
  expect_work_list_matches({"parallel.tp=2", "parallel.sequence_parallel=true", "model.family=llama", "model.n_kv_heads=2",
                            "train.precision=bf16"});
  expect_work_list_matches({"parallel.tp=2", "parallel.sequence_parallel=true", "train.recompute=full"});
  expect_work_list_matches({"parallel.dp=2", "parallel.zero=3", "train.precision=bf16", "parallel.grad_reduce_dtype=bf16"});
  expect_work_list_matches({"parallel.dp=2", "model.family=llama", "model.n_kv_heads=2"});
  expect_work_list_matches({"parallel.pp=2", "parallel.schedule=1f1b"});
  expect_work_list_matches({"parallel.pp=2", "parallel.schedule=zb-h1", "model.family=llama", "model.n_kv_heads=2",
                            "train.precision=bf16"});
}

TEST(StepWork, FourRanks) {
  if (ranks() != 4) GTEST_SKIP() << "four ranks";
  expect_work_list_matches({"parallel.tp=2", "parallel.sequence_parallel=true", "parallel.dp=2", "parallel.zero=3",
                            "model.family=llama", "model.n_kv_heads=2", "train.precision=bf16", "train.recompute=selective"});
  expect_work_list_matches({"parallel.pp=2", "parallel.tp=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2"});
  expect_work_list_matches({"parallel.pp=2", "parallel.tp=2", "parallel.sequence_parallel=true", "parallel.schedule=zb-h1",
                            "train.precision=bf16"});
  // Stages of the embedding alone and of the head alone (DeepSpeed's placement, seed note 004).
  expect_work_list_matches({"parallel.pp=4", "parallel.stage_layers=0,2,2,0"});
}
