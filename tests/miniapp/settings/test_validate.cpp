// Cross-key validation and derived keys: layouts that do not divide, shapes that do not fit,
// and the values derived when keys are left at 0.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "settings/config.hpp"
#include "platform/errors.hpp"
#include "plan/gpu_memory.hpp"
#include "plan/memory.hpp"
#include "platform/node_memory.hpp"
#include "test_env.hpp"
#include "plan/run_plan.hpp"
#include "settings/read_settings.hpp"
#include "settings/validate.hpp"
#include "train/make_plan.hpp"

using kformer::Config;
using kformer::ConfigError;

namespace {

Config tiny() {
  Config c;
  c.load_deck_file(KFORMER_SOURCE_DIR "/input/tiny.yaml");
  return c;
}

// The deck validated for `world` ranks, read and planned as a run does.
kformer::RunPlan plan_of(Config c, int world) {
  kformer::resolve_and_validate(c, world);
  return kformer::make_plan(kformer::read_settings(c));
}

// What a run says of the deck: validation, then its plan's memory against `node`.
std::string verdict(Config c, int world, const kformer::NodeMemory& node = kformer::probe_node_memory(1)) {
  try {
    kformer::check_plan_fits(plan_of(c, world), node);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Validate, TinyDeckIsValidOnOneTwoAndFourRanks) {
  for (int world : {1, 2, 4}) EXPECT_EQ(verdict(tiny(), world), "") << world;
}

TEST(Validate, DerivesDpMicrobatchesKvHeadsAndFfn) {
  Config c = tiny();
  c.apply_override("parallel.tp=2");
  kformer::resolve_and_validate(c, 4);
  EXPECT_EQ(c.i64("parallel.dp"), 2);
  EXPECT_EQ(c.i64("parallel.microbatches"), 8 / (2 * 2));
  EXPECT_EQ(c.i64("model.n_kv_heads"), 4);
  EXPECT_EQ(c.i64("model.ffn_dim"), 4 * 64);
  EXPECT_EQ(c.origin("parallel.dp"), "derived");
}

TEST(Validate, LlamaFfnIsEightThirdsRoundedTo64) {
  Config c = tiny();
  c.apply_override("model.family=llama");
  c.apply_override("model.d_model=96");
  kformer::resolve_and_validate(c, 1);
  EXPECT_EQ(c.i64("model.ffn_dim"), 256);
}

TEST(Validate, EachBadLayoutNamesItsKey) {
  struct Case { std::vector<std::string> overrides; int world; std::string must_name; };
  const std::vector<Case> cases = {
      {{"parallel.tp=3"}, 3, "parallel.tp=3 does not divide model.n_heads=4"},
      {{"parallel.tp=2", "parallel.pp=2"}, 2, "does not divide the 2 ranks"},
      {{"parallel.dp=2"}, 4, "launch 2 ranks"},
      {{"model.n_heads=5"}, 1, "model.n_heads=5 does not divide model.d_model=64"},
      {{"model.family=llama", "model.n_kv_heads=3"}, 1, "model.n_kv_heads=3"},
      {{"model.n_kv_heads=2"}, 1, "model.family=gpt"},
      {{"model.family=llama", "model.n_kv_heads=2", "parallel.tp=4"}, 4, "model.n_kv_heads=2"},
      {{"train.global_batch=6"}, 4, "train.global_batch=6"},
      {{"parallel.pp=3", "model.n_layers=2"}, 3, "parallel.pp=3 exceeds model.n_layers=2"},
      {{"parallel.pp=2", "parallel.schedule=interleaved", "parallel.virtual_stages=4"}, 2,
       "model chunks exceed model.n_layers=4"},
      {{"parallel.pp=2", "parallel.virtual_stages=2"}, 2, "needs parallel.schedule=interleaved"},
      {{"parallel.pp=4", "parallel.schedule=interleaved", "parallel.virtual_stages=2", "model.n_layers=8",
        "train.global_batch=24", "train.micro_batch=4"}, 4, "a multiple of parallel.pp=4"},
      {{"parallel.pp=2", "train.global_batch=2"}, 2, "fewer than parallel.pp=2"},
      {{"parallel.microbatches=3"}, 1, "parallel.microbatches=3"},
      {{"parallel.stage_layers=1,2", "parallel.pp=2"}, 2, "parallel.stage_layers"},
      {{"parallel.stage_layers=1,3,1", "parallel.pp=3", "train.global_batch=6"}, 3, "sum to model.n_layers=4"},
      {{"parallel.stage_layers=2,0,2", "parallel.pp=3", "train.global_batch=6"}, 3, "entry 1 is 0"},
      {{"train.seq_len=64"}, 1, "train.seq_len=64 exceeds model.max_seq_len=32"},
      {{"straggler.rank=4"}, 4, "straggler.rank=4"},
      {{"train.recompute_layers=2"}, 1, "train.recompute_layers=2 chooses the blocks train.recompute=full re-runs"},
      {{"train.recompute_layers=2", "train.recompute=selective"}, 1, "train.recompute=selective: set train.recompute=full"},
      {{"train.recompute=op"}, 1, "train.recompute=op is torchtitan's policy for Llama blocks"},
      {{"train.recompute=op", "model.family=llama", "parallel.tp=2", "parallel.sequence_parallel=true"}, 2,
       "train.recompute=op with parallel.sequence_parallel=true is not built"},
      {{"train.recompute=op", "model.family=llama", "parallel.pp=2", "parallel.schedule=zb-h1"}, 2,
       "train.recompute=op with parallel.schedule=zb-h1 is not built"},
      {{"predict.pipeline_calls=one_by_one", "parallel.pp=2", "parallel.schedule=gpipe"}, 2,
       "not parallel.schedule=gpipe: use parallel.schedule=1f1b or predict.pipeline_calls=grouped"},
      // the DeepSpeed presets set it: the line says which, so the user sees where it came from
      {{"predict.system=deepspeed-2022", "parallel.pp=2", "parallel.schedule=gpipe"}, 2,
       "predict.pipeline_calls=one_by_one (set by predict.system=deepspeed-2022) orders"},
      {{"predict.system=deepspeed-2021", "predict.pipeline_p2p=prefetched", "parallel.pp=2"}, 2,
       "describe two different pipelines: set one of them back"},
  };
  for (const auto& k : cases) {
    Config c = tiny();
    for (const auto& o : k.overrides) c.apply_override(o);
    const std::string v = verdict(c, k.world);
    EXPECT_NE(v.find(k.must_name), std::string::npos) << "got: '" << v << "' expected to contain: " << k.must_name;
  }
}

namespace {

// A fake /sys/fs/cgroup: each file of `files` (path under the root, content) written.
std::string fake_cgroup_root(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string root = ::testing::TempDir() + "kformer_cgroup_" + name;
  for (const auto& [path, content] : files) {
    const std::string full = root + "/" + path;
    std::filesystem::create_directories(std::filesystem::path(full).parent_path());
    std::ofstream(full) << content << "\n";
  }
  return root;
}

}  // namespace

TEST(NodeMemory, CgroupV2LimitIsTheSmallestOnThePathUp) {
  const std::string root = fake_cgroup_root("v2", {{"memory.max", "max"},
                                                   {"slurm/memory.max", "8589934592"},
                                                   {"slurm/job_7/memory.max", "2147483648"},
                                                   {"slurm/job_7/step_0/memory.max", "max"}});
  EXPECT_EQ(kformer::cgroup_memory_limit("0::/slurm/job_7/step_0\n", root), 2147483648.0);
  EXPECT_EQ(kformer::cgroup_memory_limit("0::/slurm\n", root), 8589934592.0);
  EXPECT_EQ(kformer::cgroup_memory_limit("0::/\n", root), 0.0);            // "max": no limit
  EXPECT_EQ(kformer::cgroup_memory_limit("0::/elsewhere\n", root), 0.0);   // no such group, root says max
}

TEST(NodeMemory, CgroupV1LimitIgnoresTheUnsetValue) {
  const std::string root = fake_cgroup_root("v1", {{"memory/memory.limit_in_bytes", "9223372036854771712"},
                                                   {"memory/job/memory.limit_in_bytes", "9223372036854771712"},
                                                   {"memory/capped/memory.limit_in_bytes", "4294967296"}});
  const std::string others = "9:name=systemd:/\n8:pids:/\n";
  EXPECT_EQ(kformer::cgroup_memory_limit(others + "4:memory:/job\n", root), 0.0);
  EXPECT_EQ(kformer::cgroup_memory_limit(others + "4:memory:/capped\n0::/\n", root), 4294967296.0);
  EXPECT_EQ(kformer::cgroup_memory_limit("3:cpu,cpuacct:/capped\n", root), 0.0);  // not the memory controller
}

TEST(NodeMemory, TheNodeIsSharedByItsRanks) {
  const double need = plan_of(tiny(), 1).memory.total();
  // Room for three ranks' estimates on the node: three ranks fit, four do not.
  const kformer::NodeMemory three{3.5 * need, 3, "cgroup memory limit"}, four{3.5 * need, 4, "cgroup memory limit"};
  EXPECT_EQ(verdict(tiny(), 1, three), "");
  const std::string v = verdict(tiny(), 1, four);
  EXPECT_NE(v.find("GB per rank of this node"), std::string::npos) << v;
  EXPECT_NE(v.find("GB cgroup memory limit / 4 ranks"), std::string::npos) << v;
  EXPECT_NE(v.find("start fewer ranks per node"), std::string::npos) << v;
  // memory.limit_gb, when given, is the limit instead.
  Config own = tiny();
  own.apply_override("memory.limit_gb=1000");
  EXPECT_EQ(verdict(own, 1, four), "");
}

// check_fits_gpus is collective: every rank offers its GPU's size, the smallest decides.
// (test_config runs as one process: the world is one rank.)
TEST(GpuMemory, TheSmallestGpuOfTheJobDecidesAndNoGpuMeansNoCheck) {
  auto world = kformer::test::world();
  const kformer::RunPlan c = plan_of(tiny(), 1);
  const double need = c.memory.total();
  EXPECT_NO_THROW(kformer::check_fits_gpus(c, *world, 0.0));  // host builds: nothing to check
  EXPECT_NO_THROW(kformer::check_fits_gpus(c, *world, 2 * need));
  try {
    kformer::check_fits_gpus(c, *world, 0.5 * need);
    FAIL() << "an estimate twice the GPU passed";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("GB of the smallest GPU of the job"), std::string::npos) << e.what();
  }
  Config with_limit = tiny();
  with_limit.apply_override("memory.limit_gb=1000");
  EXPECT_NO_THROW(kformer::check_fits_gpus(plan_of(with_limit, 1), *world, 0.5 * need));
}

// bf16 halves what the activations kept for backward cost (all but the fp32 residual stream and
// statistics) and adds a bf16 copy to every fp32 master: at the gpt shape of issue 16 (4 layers,
// d 768, seq 1024, micro-batch 4, tiny's vocabulary) the estimate falls (to about 0.75 of fp32
// with naive attention: gradients, AdamW state and fp32 work buffers do not shrink); where
// weights dominate it rises, and says why.
TEST(Validate, MemoryEstimatePerPrecision) {
  for (const char* attention : {"naive", "fused"}) {
    Config c = tiny();
    for (const char* kv : {"model.n_layers=4", "model.d_model=768", "model.n_heads=12", "model.max_seq_len=1024", "train.seq_len=1024", "train.micro_batch=4",
                           "train.global_batch=4"})
      c.apply_override(kv);
    c.apply_override(std::string("kernels.attention=") + attention);
    const auto fp32 = plan_of(c, 1).memory;
    c.apply_override("train.precision=bf16");
    const auto bf16 = plan_of(c, 1).memory;
    EXPECT_LE(bf16.total(), (attention[0] == 'n' ? 0.8 : 0.9) * fp32.total()) << attention;
    // The residual stream, the norms' statistics and each slot's input and gradient stay fp32.
    EXPECT_LE(bf16.activations, 0.6 * fp32.activations) << attention;
    EXPECT_GE(bf16.activations, 0.5 * fp32.activations) << attention;  // the fp32 residual stream is counted
    EXPECT_DOUBLE_EQ(bf16.params, 1.5 * fp32.params);
    EXPECT_DOUBLE_EQ(bf16.optimizer, fp32.optimizer);
    EXPECT_NE(kformer::describe(bf16).find("fp32 masters + bf16 copies"), std::string::npos);
  }
  Config w = tiny();  // weight-dominated: a wide vocabulary, one short sequence
  for (const char* kv : {"model.vocab_size=50257", "train.seq_len=8", "train.micro_batch=1", "train.global_batch=1"})
    w.apply_override(kv);
  const double fp32 = plan_of(w, 1).memory.total();
  w.apply_override("train.precision=bf16");
  EXPECT_GT(plan_of(w, 1).memory.total(), fp32);
}
