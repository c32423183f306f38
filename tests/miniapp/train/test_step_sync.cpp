// What one steady-state training step asks of the device runtime, seen through the Kokkos Tools
// callbacks (allocations, deep copies, fences, kernel launches, profiling regions): no allocation,
// no fence inside the step but the one that ends it, and copies only for what must cross between
// host and device (the tokens in, the loss and gradient norm out). And the profiling regions
// that name the step's phases for nsys and the Kokkos tools, balanced and with the expected names.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/mesh.hpp"
#include "settings/read_settings.hpp"
#include "test_env.hpp"
#include "train/trainer.hpp"
#include "train/make_plan.hpp"

using namespace kformer;

namespace {

namespace kt = Kokkos::Tools::Experimental;

// What the callbacks saw while `counting` was on (the step), and the regions of the whole run.
struct Seen {
  std::mutex mutex;
  bool counting = false;
  int allocations = 0, transfers = 0, fills = 0, fences = 0, unnamed_fences = 0, reductions = 0;
  int deep_copy_depth = 0;                     // fences inside a deep copy belong to it (4.x fences there)
  std::map<std::string, int> kernels;          // launches by label, during the step
  std::vector<std::string> allocation_labels;  // during the step, for the failure message
  std::vector<std::string> fence_labels;
  std::map<std::string, int> regions;  // pushes by name, whole run
  int open_regions = 0, max_open = 0;
};
Seen* g_seen = nullptr;
kt::EventSet g_chained{};

void on_allocate(Kokkos::Tools::SpaceHandle h, const char* label, const void* ptr, std::uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(g_seen->mutex);
    if (g_seen->counting) ++g_seen->allocations, g_seen->allocation_labels.push_back(label ? label : "");
  }
  if (g_chained.allocate_data) g_chained.allocate_data(h, label, ptr, bytes);  // comm's allocation registry
}
void on_deep_copy(Kokkos::Tools::SpaceHandle, const char*, const void*, Kokkos::Tools::SpaceHandle,
                  const char* src_label, const void*, std::uint64_t) {
  std::lock_guard<std::mutex> lock(g_seen->mutex);
  ++g_seen->deep_copy_depth;
  if (!g_seen->counting) return;
  // A fill from a scalar (deep_copy(view, value)) reports its source as "(none)" or "Scalar" in
  // 3.4 and 4.x alike: it is a kernel on the device, not a transfer.
  const std::string src = src_label ? src_label : "";
  if (src == "(none)" || src == "Scalar")
    ++g_seen->fills;
  else
    ++g_seen->transfers;
}
void on_end_deep_copy() {
  std::lock_guard<std::mutex> lock(g_seen->mutex);
  --g_seen->deep_copy_depth;
}
void on_fence(const char* name, std::uint32_t, std::uint64_t* id) {
  *id = 0;
  // Kokkos 4.x fences around every callback for tools that did not declare they need no global
  // fencing, which only Kokkos' own tool loading can declare: an effect of this probe, not of
  // the step.
  if (std::strstr(name, "Kokkos Profile Tool Fence")) return;
  std::lock_guard<std::mutex> lock(g_seen->mutex);
  if (!g_seen->counting || g_seen->deep_copy_depth > 0) return;
  // exec.fence() without a label (reported by 4.x only): in a step, the GEMM kernels' fence after
  // each call on a host back-end, which hands their shared workspace to the next caller
  // (detail::release_workspace; none on a GPU). kformer's own fences carry labels (kernels::fence).
  if (std::strstr(name, "Unnamed Instance Fence"))
    ++g_seen->unnamed_fences;
  else
    ++g_seen->fences, g_seen->fence_labels.push_back(name);
}
void on_kernel(const char* name, std::uint32_t, std::uint64_t* id) {
  *id = 0;
  std::lock_guard<std::mutex> lock(g_seen->mutex);
  if (g_seen->counting) ++g_seen->kernels[name];
}
void on_reduce(const char* name, std::uint32_t dev, std::uint64_t* id) {
  on_kernel(name, dev, id);
  std::lock_guard<std::mutex> lock(g_seen->mutex);
  if (g_seen->counting) ++g_seen->reductions;
}
void on_push(const char* name) {
  std::lock_guard<std::mutex> lock(g_seen->mutex);
  ++g_seen->regions[name];
  g_seen->max_open = std::max(g_seen->max_open, ++g_seen->open_regions);
}
void on_pop() {
  std::lock_guard<std::mutex> lock(g_seen->mutex);
  --g_seen->open_regions;
}

// Installs the counting callbacks for its lifetime, then restores whatever was there before
// (the allocation registry test_main installed, or a tool).
class ToolProbe {
 public:
  explicit ToolProbe(Seen& seen) {
    g_seen = &seen;
    g_chained = kt::get_callbacks();
    kt::set_allocate_data_callback(on_allocate);
    kt::set_begin_deep_copy_callback(on_deep_copy);
    kt::set_end_deep_copy_callback(on_end_deep_copy);
    kt::set_begin_fence_callback(on_fence);
    kt::set_begin_parallel_for_callback(on_kernel);
    kt::set_begin_parallel_reduce_callback(on_reduce);
    kt::set_begin_parallel_scan_callback(on_kernel);
    kt::set_push_region_callback(on_push);
    kt::set_pop_region_callback(on_pop);
  }
  ~ToolProbe() {
    kt::set_callbacks(g_chained);
    g_seen = nullptr;
  }
  ToolProbe(const ToolProbe&) = delete;
  ToolProbe& operator=(const ToolProbe&) = delete;
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Trains `overrides` on tiny.yaml for 3 iterations on one rank and records iteration 3 (a steady
// state: every buffer of the run exists after iteration 1, the optimizer's moments included).
struct StepRun {
  Seen seen;
  int microbatches = 0;
  std::vector<double> losses;
  bool checkpoint_called = false;

  explicit StepRun(const std::vector<std::string>& overrides) {
    std::vector<std::string> given = {"train.steps=3"};
    given.insert(given.end(), overrides.begin(), overrides.end());
    const RunPlan plan = make_plan(load_settings(KFORMER_SOURCE_DIR "/input/tiny.yaml", given, 1));
    microbatches = plan.settings.parallel.microbatches;
    auto world = test::world();
    if (world->size() != 1) throw std::runtime_error("test_step_sync runs on one rank");
    comm::Mesh mesh = comm::build_mesh(*world, {1, 1, 1});
    Trainer trainer(plan, *world, mesh, nullptr);  // no start-up timing: the plan's GEMM (native for auto)
    trainer.after_iteration = [&](const IterationRecord& r) {
      losses.push_back(r.loss);
      std::lock_guard<std::mutex> lock(seen.mutex);
      seen.counting = r.iteration == 2;  // on from the end of iteration 2 to the end of iteration 3
    };
    trainer.save_checkpoint = [&](const TrainingPosition&) { checkpoint_called = true; };  // at the end: not counted
    ToolProbe probe(seen);
    trainer.run();
  }
};

void expect_steady_step(const std::vector<std::string>& overrides) {
  StepRun run(overrides);
  const Seen& s = run.seen;
  const int m = run.microbatches;
  std::cout << "steady step, " << m << " micro-batches: " << s.allocations << " allocations, " << s.transfers
            << " transfers, " << s.fills << " fills, " << s.fences << " fences (" << joined(s.fence_labels) << "), " << s.unnamed_fences
            << " unnamed fences, "
            << s.reductions << " parallel_reduce launches" << std::endl;
  ASSERT_EQ(run.losses.size(), 3u);
  for (double l : run.losses) EXPECT_TRUE(std::isfinite(l));
  // Every buffer of a step exists from the first one on: an allocation inside the step is a
  // cudaMalloc (and a device synchronisation) on a GPU.
  EXPECT_EQ(s.allocations, 0) << "allocated during a steady-state step: " << joined(s.allocation_labels);
  // Copies between host and device: one upload per micro-batch (its tokens: the inputs, the
  // targets and the embedding backward's token index, packed in one buffer) and one readback per
  // step (the loss and the squared gradient norm together: the log line and the NaN check need
  // them on the host, and the clipping factor is computed there).
  EXPECT_LE(s.transfers, m + 1) << "deep copies between buffers in one step with " << m << " micro-batches";
  // Fills (zeroing the gradients) are device kernels, not transfers; a handful per step.
  EXPECT_LE(s.fills, 2);
  // Labelled fences outside deep copies (kformer's, and Kokkos' own on 4.x, such as a reduction
  // into a host value): only the one that ends the optimizer step (its time and the step time
  // reported for the iteration); none per micro-batch, per tensor or per layer.
  EXPECT_LE(s.fences, 1) << "fences: " << joined(s.fence_labels);
  // The gradient norm is one fused reduction over every tensor, not one per tensor.
  int norm_kernels = 0;
  for (const auto& [name, n] : s.kernels)
    if (name.rfind("kformer::grad_norm", 0) == 0) norm_kernels += n;
  EXPECT_EQ(norm_kernels, 2) << "the fused gradient norm: its blocks' partial sums, then their total";
  EXPECT_EQ(s.kernels.count("kformer::sum_of_squares"), 0u) << "a blocking reduction per tensor";
  // The profiling regions of the phases, balanced.
  EXPECT_EQ(s.open_regions, 0);
  for (const char* name : {"kformer::step", "kformer::forward", "kformer::backward", "kformer::grad_sync",
                           "kformer::grad_norm", "kformer::optimizer", "kformer::checkpoint"})
    EXPECT_GE(s.regions.count(name) ? s.regions.at(name) : 0, 1) << "no profiling region " << name;
  EXPECT_EQ(s.regions.count("kformer::step") ? s.regions.at("kformer::step") : 0, 3);
  EXPECT_EQ(s.regions.count("kformer::forward") ? s.regions.at("kformer::forward") : 0, 3 * m);
  EXPECT_TRUE(run.checkpoint_called);
}

}  // namespace

TEST(SteadyStep, GptNeedsNoAllocationAndNoFenceButTheReadback) { expect_steady_step({}); }

TEST(SteadyStep, LlamaWithFusedAttentionNeedsNoAllocationAndNoFenceButTheReadback) {
  expect_steady_step({"model.family=llama", "model.n_kv_heads=2", "kernels.attention=fused"});
}

TEST(SteadyStep, Bf16NeedsNoAllocationAndNoFenceButTheReadback) { expect_steady_step({"train.precision=bf16"}); }

// output.phase_timing=true buys exact per-phase device times with a fence after each forward
// (the last chunk's also ends with the head's backward: a second fence) and each backward.
TEST(SteadyStep, PhaseTimingFencesEachForwardAndBackward) {
  StepRun run({"output.phase_timing=true"});
  EXPECT_EQ(run.seen.allocations, 0);
  EXPECT_EQ(run.seen.fences, 3 * run.microbatches + 1) << joined(run.seen.fence_labels);
}
