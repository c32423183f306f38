// predict.host: eager PyTorch's host time per layer (a profile's eager_host, measured by
// bench/eager_op_cost.py) as a floor under each pass (eager), or added to it (blocking:
// CUDA_LAUNCH_BLOCKING=1); nothing where the profile has no figure; the profile's section read,
// refused without its source, and written back by profile_yaml.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "platform/errors.hpp"
#include "predict/chunk_work.hpp"
#include "predict/machine_profile.hpp"
#include "predict/step_sim.hpp"
#include "settings/prediction_deck.hpp"
#include "train/make_plan.hpp"

namespace kp = kformer::predict;

namespace {

const std::string kSource = KFORMER_SOURCE_DIR;

kp::MachineProfile a100() { return kp::load_profile(kSource + "/input/machines/perlmutter-a100-40gb.yaml"); }

// tiny.yaml (4 layers) on one rank, micro-batches of 2 over a global batch of 8: four per step.
kformer::RunPlan plan(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), {kSource + "/input/tiny.yaml", "predict.world=1", "train.global_batch=8",
                                       "train.micro_batch=2"});
  return kformer::make_plan(kformer::read_prediction_deck("predict", overrides, false).settings);
}

double compute(const std::vector<kp::WorkItem>& items) { return kp::compute_us(items); }

double step_ms(const kp::MachineProfile& p, const std::string& host, const std::string& extra = "train.recompute=none") {
  return kp::predict_step(plan({"predict.host=" + host, extra}), p, false).step_ms;
}

}  // namespace

// Blocking: the host's per-layer time adds to every pass of every micro-batch: 4 micro-batches x
// 4 layers x (forward + backward), and under full recomputation the forward's once more.
TEST(PredictHost, BlockingAddsTheHostsTimeToEveryPass) {
  kp::MachineProfile p = a100();
  p.eager_host = {100, 150, 300, 700, "test"};
  const double base = step_ms(p, "kformer");
  EXPECT_NEAR(step_ms(p, "blocking") - base, 4 * 4 * (300 + 700) * 1e-3, 1e-6 * base);
  const double full = step_ms(p, "kformer", "train.recompute=full");
  EXPECT_NEAR(step_ms(p, "blocking", "train.recompute=full") - full, 4 * 4 * (300 + 700 + 300) * 1e-3, 1e-6 * full);
}

// Eager: a pass takes the longer of its kernels and the host's time. A host far slower than the
// A100's kernels sets each pass's time; one far faster changes nothing.
TEST(PredictHost, EagerIsTheLongerOfTheKernelsAndTheHost) {
  kp::MachineProfile p = a100();
  const kformer::RunPlan pl = plan({"predict.host=eager"});
  const kp::ChunkWork kernels_only = kp::chunk_work(p, plan({"predict.host=kformer"}), 0);
  p.eager_host = {1e-3, 1e-3, 0, 0, "test"};
  const kp::ChunkWork fast = kp::chunk_work(p, pl, 0);
  EXPECT_EQ(compute(fast.forward), compute(kernels_only.forward));
  EXPECT_EQ(compute(fast.backward), compute(kernels_only.backward));
  p.eager_host = {5e4, 8e4, 0, 0, "test"};
  const kp::ChunkWork slow = kp::chunk_work(p, pl, 0);
  ASSERT_GT(4 * 5e4, compute(kernels_only.forward));
  EXPECT_NEAR(compute(slow.forward), 4 * 5e4, 1e-9 * 1e5);
  EXPECT_NEAR(compute(slow.backward), 4 * 8e4, 1e-9 * 1e5);
  EXPECT_EQ(compute(slow.head_backward), compute(kernels_only.head_backward));
}

// A profile without the figures costs eager and blocking as kformer, and the report says so.
TEST(PredictHost, NoFiguresNoCost) {
  const kp::MachineProfile p = a100();
  ASSERT_FALSE(p.eager_host.given(false));
  EXPECT_EQ(step_ms(p, "eager"), step_ms(p, "kformer"));
  EXPECT_EQ(step_ms(p, "blocking"), step_ms(p, "kformer"));
  kp::MachineProfile only_async = p;
  only_async.eager_host = {100, 150, 0, 0, "test"};
  EXPECT_EQ(step_ms(only_async, "blocking"), step_ms(p, "kformer"));  // no blocking figures
}

// The section read from a file, written back by profile_yaml and read again; without a source,
// one line naming the key.
TEST(PredictHost, TheProfileSectionIsReadWrittenAndChecked) {
  std::ifstream in(kSource + "/input/machines/perlmutter-a100-40gb.yaml");
  const std::string base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = testing::TempDir() + "eager_host_profile.yaml";
  const auto write = [&](const std::string& text) {
    std::ofstream(path) << text;
    return path;
  };
  const std::string section = "eager_host:\n  layer_forward_us: 210\n  layer_backward_us: 260\n"
                              "  blocking_layer_forward_us: 410\n  blocking_layer_backward_us: 520\n";
  const kp::MachineProfile p = kp::load_profile(write(base + section + "  source: \"a run\"\n"));
  EXPECT_EQ(p.eager_host.layer_forward_us, 210);
  EXPECT_EQ(p.eager_host.blocking_layer_backward_us, 520);
  EXPECT_EQ(p.eager_host.source, "a run");
  const kp::MachineProfile again = kp::load_profile(write(kp::profile_yaml(p, "# again\n")));
  EXPECT_EQ(again.eager_host.layer_backward_us, 260);
  EXPECT_EQ(again.eager_host.blocking_layer_forward_us, 410);
  try {
    kp::load_profile(write(base + section));
    ADD_FAILURE() << "an eager_host section without its source was read";
  } catch (const kformer::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("eager_host.source"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}
