// predict.host: eager PyTorch's host time per layer (a profile's eager_host, measured by
// bench/eager_op_cost.py) as a floor under each pass (eager), or added to it (blocking:
// CUDA_LAUNCH_BLOCKING=1); eager, the model's top and the optimizer's step beside the layers;
// nothing where the profile has no figure; the profile's section read,
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

// Eager, beside the layers: the model's top (head and loss, the embedding's few operators with
// them) on the chunk that holds the head, forward and backward; nothing on the others, nothing
// under blocking, whose figures are the layers' alone.
TEST(PredictHost, EagerChargesTheModelsTopOnTheLastChunk) {
  kp::MachineProfile p = a100();
  p.eager_host = {5e4, 8e4, 0, 0, "test", 3e4, 6e4, 0};
  const kp::ChunkWork one = kp::chunk_work(p, plan({"predict.host=eager"}), 0);
  EXPECT_NEAR(compute(one.forward), 4 * 5e4 + 3e4, 1e-9 * 1e5);
  EXPECT_NEAR(compute(one.backward), 4 * 8e4 + 6e4, 1e-9 * 1e5);
  const kformer::RunPlan two = plan({"predict.host=eager", "predict.world=2", "parallel.pp=2"});
  const kp::ChunkWork first = kp::chunk_work(p, two, 0), last = kp::chunk_work(p, two, 1);
  EXPECT_NEAR(compute(first.forward), 2 * 5e4, 1e-9 * 1e5);
  EXPECT_NEAR(compute(first.backward), 2 * 8e4, 1e-9 * 1e5);
  EXPECT_NEAR(compute(last.forward), 2 * 5e4 + 3e4, 1e-9 * 1e5);
  EXPECT_NEAR(compute(last.backward), 2 * 8e4 + 6e4, 1e-9 * 1e5);
  kp::MachineProfile blocking = p;
  blocking.eager_host = {5e4, 8e4, 300, 700, "test", 3e4, 6e4, 0};
  kp::MachineProfile layers_only = blocking;
  layers_only.eager_host.top_forward_us = layers_only.eager_host.top_backward_us = 0;
  EXPECT_EQ(step_ms(blocking, "blocking"), step_ms(layers_only, "blocking"));
}

// Eager, once a step: the optimizer's step and zero_grad take the longer of their kernels and the
// host's time for them; a host faster than the kernels changes nothing.
TEST(PredictHost, EagerOptimizerIsTheLongerOfItsKernelsAndTheHost) {
  kp::MachineProfile p = a100();
  p.eager_host = {1e-3, 1e-3, 0, 0, "test", 0, 0, 0};
  const kformer::RunPlan pl = plan({"predict.host=eager"});
  const kp::StepPrediction kernels_only = kp::predict_step(pl, p, false);
  ASSERT_GT(kernels_only.rank0.optimizer_ms, 0);
  p.eager_host.optimizer_us = 0.5 * kernels_only.rank0.optimizer_ms * 1e3;
  EXPECT_EQ(kp::predict_step(pl, p, false).step_ms, kernels_only.step_ms);
  p.eager_host.optimizer_us = 2e5;
  const kp::StepPrediction slow = kp::predict_step(pl, p, false);
  EXPECT_NEAR(slow.rank0.optimizer_ms, 200, 1e-9 * 200);
  EXPECT_NEAR(slow.step_ms - kernels_only.step_ms, 200 - kernels_only.rank0.optimizer_ms, 1e-9 * 200);
  EXPECT_EQ(kp::predict_step(plan({"predict.host=kformer"}), p, false).step_ms, kernels_only.step_ms);
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
                              "  blocking_layer_forward_us: 410\n  blocking_layer_backward_us: 520\n"
                              "  top_forward_us: 90\n  top_backward_us: 120\n  optimizer_us: 700\n";
  const kp::MachineProfile p = kp::load_profile(write(base + section + "  source: \"a run\"\n"));
  EXPECT_EQ(p.eager_host.layer_forward_us, 210);
  EXPECT_EQ(p.eager_host.blocking_layer_backward_us, 520);
  EXPECT_EQ(p.eager_host.source, "a run");
  const kp::MachineProfile again = kp::load_profile(write(kp::profile_yaml(p, "# again\n")));
  EXPECT_EQ(again.eager_host.layer_backward_us, 260);
  EXPECT_EQ(again.eager_host.blocking_layer_forward_us, 410);
  EXPECT_EQ(again.eager_host.top_forward_us, 90);
  EXPECT_EQ(again.eager_host.top_backward_us, 120);
  EXPECT_EQ(again.eager_host.optimizer_us, 700);
  try {
    kp::load_profile(write(base + section));
    ADD_FAILURE() << "an eager_host section without its source was read";
  } catch (const kformer::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("eager_host.source"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}
