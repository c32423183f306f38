// The run plan is made once per run: a whole run of the driver's library (load_plan, then
// run_app to its report) makes one memory estimate (in run_app: it describes a step), which the start-up lines, the report and the
// memory checks all read. A second estimate_memory call anywhere in a run's path fails this.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app.hpp"
#include "plan/memory.hpp"
#include "test_env.hpp"
#include "settings/read_settings.hpp"
#include "train/make_plan.hpp"
#include "train/rank_model.hpp"

namespace {

kformer::CliArgs tiny_run(const std::string& report) {
  kformer::CliArgs args;
  args.deck = KFORMER_SOURCE_DIR "/input/tiny.yaml";
  args.overrides = {"train.steps=2", "kernels.gemm=native", "output.json=" + report};
  return args;
}

}  // namespace

TEST(RunPlan, ARunMakesOneMemoryEstimateAndReportsIt) {
  const std::string report = ::testing::TempDir() + "kformer_run_plan.json";
  std::remove(report.c_str());
  const kformer::CliArgs args = tiny_run(report);
  const long before = kformer::estimates_made().load();
  const kformer::RunPlan plan = kformer::load_plan(args, 1);
  EXPECT_EQ(kformer::run_app(args, plan, kformer::test::runtime()), 0);
  EXPECT_EQ(kformer::estimates_made().load() - before, 1) << "estimates made by one run";
  std::ifstream in(report);
  ASSERT_TRUE(in.good()) << report;
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["summary"]["memory"]["estimated_bytes"].get<double>(), kformer::with_memory(plan).memory.total());
  EXPECT_EQ(j["iterations"].size(), 2u);
}

// The estimate's kinds are the components' own buffers: on one rank the store's parameters are its
// size in fp32 (and again in bf16 under mixed precision), its gradients the same in fp32, the
// optimizer two moments per element; all read off a real store of the plan, not off the estimate's
// code. A scope misplaced (a gradient buffer made under the parameters' kind) fails it.
TEST(RunPlan, TheEstimatesKindsAreTheStoresAndTheOptimizersBuffers) {
  for (const char* precision : {"fp32", "bf16"}) {
    const kformer::RunPlan plan = kformer::make_plan(kformer::load_settings(
        KFORMER_SOURCE_DIR "/input/tiny.yaml", {std::string("train.precision=") + precision}, 1));
    const auto model = kformer::build_rank_model(plan, {0, 0, 0}, {});
    const double n = double(model->params->size());
    const bool bf16 = std::string(precision) == "bf16";
    const kformer::MemoryEstimate& e = plan.memory;
    EXPECT_EQ(e.params, (bf16 ? 6.0 : 4.0) * n) << precision;
    EXPECT_EQ(e.grads, 4.0 * n) << precision;
    EXPECT_EQ(e.optimizer, 8.0 * n) << precision;
    EXPECT_GT(e.activations, 0) << precision;
    EXPECT_GT(e.workspace, 0) << precision;
  }
}
