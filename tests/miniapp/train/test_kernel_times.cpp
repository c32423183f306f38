// output.kernel_times (platform/kernel_times.hpp): a run's kernel calls timed between fences. The
// timer sees every call the step makes: in each timed step, each entry point's calls made outside
// any other call are the described iteration's (train/step_work.hpp), name for name; a call inside
// another counts its time once, for itself (the calls' times sum to no more than the wall time
// around them, where counting the inner one in the outer too would double it); the figures per
// step add up (families to calls, calls and the rest to the step); and timing changes nothing a
// step computes. Not a timed test: no figure's size is checked against a machine's speed.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "comm/mesh.hpp"
#include "settings/read_settings.hpp"
#include "test_env.hpp"
#include "train/make_plan.hpp"
#include "train/step_work.hpp"
#include "train/trainer.hpp"

using namespace kformer;

namespace {

struct TrainedRun {
  std::vector<IterationRecord> records;
  std::unique_ptr<KernelTimes> times;  // a copy of the trainer's, or null
};

TrainedRun train(const std::vector<std::string>& overrides, RunPlan* plan_out = nullptr) {
  auto world = test::world();
  std::vector<std::string> given = {"train.steps=3", "output.log_every=100"};
  given.insert(given.end(), overrides.begin(), overrides.end());
  const RunPlan plan = make_plan(load_settings(KFORMER_SOURCE_DIR "/input/tiny.yaml", given, 1));
  if (plan_out) *plan_out = plan;
  comm::Mesh mesh = comm::build_mesh(*world, {1, 1, 1});
  Trainer trainer(plan, *world, mesh, nullptr);
  trainer.run();
  TrainedRun r{trainer.records(), nullptr};
  if (trainer.kernel_times()) r.times = std::make_unique<KernelTimes>(*trainer.kernel_times());
  return r;
}

}  // namespace

TEST(KernelTimes, EveryCallOfTheDescribedStepIsTimedOnceAStep) {
  if (test::world()->size() != 1) GTEST_SKIP() << "one rank";
  for (const auto& features : std::vector<std::vector<std::string>>{
           {}, {"model.family=llama", "model.n_kv_heads=2", "train.precision=bf16", "train.recompute=selective"}}) {
    RunPlan plan;
    std::vector<std::string> o = features;
    o.push_back("output.kernel_times=true");
    const TrainedRun run = train(o, &plan);
    ASSERT_TRUE(run.times);
    EXPECT_EQ(run.times->steps(), 2);  // the steps after the run's first
    std::map<std::string, double> described, timed;
    for (const WorkEntry& e : describe_iteration(plan, RankPlace{0, 0, 0}).entries)
      if (e.kind == WorkEntry::Kind::kernel) described[e.call.name] += 1;
    for (const KernelTime& k : run.times->entries())
      if (k.top_calls > 0) timed[k.name] += k.top_calls;
    ASSERT_GT(described.size(), 5u);
    EXPECT_EQ(timed, described) << "the timed step's own calls by entry point are not the described iteration's";
    double families = 0;
    for (const auto& [family, ms] : run.times->family_ms()) families += ms;
    EXPECT_NEAR(families, run.times->calls_ms(), 1e-9 * run.times->calls_ms());
    EXPECT_GT(run.times->calls_ms(), 0);
    EXPECT_LE(run.times->calls_ms(), run.times->step_ms()) << "the calls took longer than the steps they are in";
  }
}

TEST(KernelTimes, TimingChangesNothingAStepComputes) {
  if (test::world()->size() != 1) GTEST_SKIP() << "one rank";
  const TrainedRun plain = train({}), timed = train({"output.kernel_times=true"});
  EXPECT_FALSE(plain.times);
  ASSERT_EQ(plain.records.size(), timed.records.size());
  for (std::size_t i = 0; i < plain.records.size(); ++i) {
    EXPECT_EQ(plain.records[i].loss, timed.records[i].loss) << "iteration " << i + 1;
    EXPECT_EQ(plain.records[i].grad_norm, timed.records[i].grad_norm) << "iteration " << i + 1;
  }
}

// A call inside another: each call's time is its own, so the two add up to no more than the wall
// time around the outer one (counting the inner call in the outer's time too would come to about
// twice the inner's 40 ms, above it). Its calls made inside another call are not its top calls.
TEST(KernelTimes, ACallInsideAnotherCountsOnce) {
  KernelTimes k;
  const auto t0 = std::chrono::steady_clock::now();
  k.begin("outer", kernels::Family::norm);
  k.begin("inner", kernels::Family::gemm);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  k.end();
  k.end();
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  k.step_done(wall_ms);
  ASSERT_EQ(k.entries().size(), 2u);
  EXPECT_EQ(k.entries()[0].name, "inner");  // longest first
  EXPECT_GE(k.entries()[0].ms, 40.0);
  EXPECT_LE(k.calls_ms(), wall_ms);
  EXPECT_EQ(k.entries()[0].top_calls, 0);
  EXPECT_EQ(k.entries()[1].top_calls, 1);
  EXPECT_EQ(k.family_ms().at("gemm"), k.entries()[0].ms);
}
