// The figures of a run as pure functions: FLOPs counted per operation against the 6N + attention
// closed form, the learning-rate schedule, the straggler figures, the Megatron log line, the
// memory estimate and its limit check.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "platform/errors.hpp"
#include "model/flops.hpp"
#include "model/model_spec.hpp"
#include "plan/memory.hpp"
#include "train/metrics.hpp"
#include "model/optimizer.hpp"
#include "report/summary_text.hpp"
#include "plan/run_plan.hpp"
#include "settings/read_settings.hpp"
#include "train/make_plan.hpp"

using namespace kformer;

namespace {
// tiny.yaml with `overrides`, checked as a run checks it (its memory against the limit included).
RunPlan deck(std::vector<std::string> overrides, int world = 1) {
  RunPlan plan = make_plan(load_settings(KFORMER_SOURCE_DIR "/input/tiny.yaml", overrides, world));
  check_plan_fits(plan, NodeMemory{});
  return plan;
}
}  // namespace

TEST(Flops, CountedPerOperationEqualsTheClosedFormOnEveryTpSlice) {
  for (const char* family : {"gpt", "llama"})
    for (int tp : {1, 2, 4}) {
      const bool gpt = std::string(family) == "gpt";
      const RunPlan c = deck({std::string("model.family=") + family, "model.n_heads=8", gpt ? "model.n_kv_heads=0" : "model.n_kv_heads=4",
                       "parallel.tp=" + std::to_string(tp)}, tp);
      const ModelShape s = c.shape;
      const BlockDims d = block_dims(s, 3, 32);
      // Sum over the TP ranks of one micro-batch: every rank counts its slice.
      const double counted = tp * (s.n_layers * block_flops(d).total() + head_flops(d.N(), s.d_model, s.vocab_padded / tp).total());
      EXPECT_NEAR(counted, closed_form_flops_per_token(s, 32) * d.N(), 1e-9 * counted) << family << " tp=" << tp;
    }
}

// The report's figure (docs/figures.md): Megatron-LM's and PaLM's count, the attention square
// whole (12 L T H hd per token against the causal 6), and what recomputation adds beside it.
TEST(Flops, TheFieldsConventionCountsTheWholeAttentionSquare) {
  for (const char* family : {"gpt", "llama"}) {
    const bool gpt = std::string(family) == "gpt";
    const RunPlan c = deck({std::string("model.family=") + family, "model.n_heads=8", gpt ? "model.n_kv_heads=0" : "model.n_kv_heads=4"}, 1);
    const ModelShape s = c.shape;
    const double model = model_flops_per_token(s, 32), attention = 6.0 * s.n_layers * 32 * s.n_heads * s.head_dim;
    EXPECT_NEAR(model - closed_form_flops_per_token(s, 32), attention, 1e-9 * model) << family;
    // Full recomputation re-runs the blocks' forward: a third of their model FLOPs (the head's 6 V C is not re-run).
    const double blocks = model - 6.0 * s.vocab_padded * s.d_model;
    const int L = s.n_layers;
    EXPECT_NEAR(recompute_flops_per_token(s, 32, Recompute::full, kernels::AttentionKind::naive, L), blocks / 3, 1e-9 * model);
    // train.recompute_layers: only the blocks re-run count, each a layer's share.
    EXPECT_NEAR(recompute_flops_per_token(s, 32, Recompute::full, kernels::AttentionKind::naive, 1), blocks / 3 / L,
                1e-9 * model);
    // Selective (naive attention): QK^T and AV forward, a sixth of the attention term's 12.
    EXPECT_NEAR(recompute_flops_per_token(s, 32, Recompute::selective, kernels::AttentionKind::naive, 0),
                4.0 * s.n_layers * 32 * s.n_heads * s.head_dim, 1e-9 * model);
    EXPECT_EQ(recompute_flops_per_token(s, 32, Recompute::selective, kernels::AttentionKind::fused, 0), 0.0);
    EXPECT_EQ(recompute_flops_per_token(s, 32, Recompute::none, kernels::AttentionKind::naive, 0), 0.0);
  }
}

TEST(Flops, CausalAttentionCountsHalfTheSquare) {
  BlockDims d;
  d.B = 1, d.T = 100, d.C = 8, d.Hl = 2, d.KVl = 2, d.hd = 4, d.Fl = 0, d.gpt = true;
  const double matmul = 2.0 * 100 * 8 * (d.qkv_width() + d.q_width()) + 0;
  EXPECT_DOUBLE_EQ(block_flops(d).forward - matmul, 2.0 * 2 * 100 * 100 * 4);  // QK^T + AV, each T*T*hd/2*2
  EXPECT_DOUBLE_EQ(block_flops(d).backward, 2 * block_flops(d).forward);
}

TEST(LearningRate, WarmupThenCosineToATenth) {
  OptimizerSettings s{1e-3, 0, 10, 110, 0};
  EXPECT_DOUBLE_EQ(learning_rate(s, 1), 1e-4);
  EXPECT_DOUBLE_EQ(learning_rate(s, 10), 1e-3);
  EXPECT_NEAR(learning_rate(s, 60), 0.55e-3, 1e-12);  // half way down the cosine
  EXPECT_NEAR(learning_rate(s, 110), 1e-4, 1e-12);
  EXPECT_NEAR(learning_rate(s, 500), 1e-4, 1e-12);   // stays at the floor past train.steps
}

TEST(Straggler, CclBenchDefinitions) {
  const Straggler s = straggler_of({10, 12, 25, 11});
  EXPECT_DOUBLE_EQ(s.slowdown, 2.5);
  EXPECT_DOUBLE_EQ(s.delay, 15.0 / 25.0);
  EXPECT_EQ(s.slowest_rank, 2);
  EXPECT_DOUBLE_EQ(straggler_of({7, 7}).slowdown, 1.0);
  EXPECT_DOUBLE_EQ(median({3, 1, 2, 10}), 2.5);
}

TEST(LogLine, CarriesMegatronsFields) {
  IterationRecord r;
  r.iteration = 7, r.total = 20, r.consumed_samples = 56, r.consumed_tokens = 1792, r.elapsed_s = 0.25;
  r.lr = 3e-4, r.global_batch = 8, r.loss = 5.25, r.grad_norm = 1.5, r.skipped_total = 1, r.nan_total = 1;
  r.samples_per_s = 32, r.tokens_per_s = 1024, r.tflops_per_rank = 0.125;
  const std::string l = format_log_line(r);
  for (const char* f : {"iteration        7/      20", "consumed samples:           56",
                        "consumed tokens:           1792", "elapsed time per iteration (s): 0.250",
                        "learning rate: 3.000E-04", "global batch size:     8", "lm loss: 5.250000E+00",
                        "grad norm: 1.500", "number of skipped iterations:   1", "number of nan iterations:   1",
                        "samples per second: 32.000", "tokens per second: 1024.0", "TFLOPs: 0.125"})
    EXPECT_NE(l.find(f), std::string::npos) << "missing '" << f << "' in\n" << l;
}

TEST(Summary, FigureOfMeritFirstThenTheBlockFromTheReportsNumbers) {
  const nlohmann::json s = {{"step_ms_median", 12.5},
                            {"tokens_per_s", 20480.0},
                            {"model_tflops_per_rank", 0.25},
                            {"iterations_summarised", 3},
                            {"mfu", 0.5},
                            {"mfu_fma_peak", 0.125},
                            {"fma_peak_tflops", 2.0},
                            {"gemm_ceiling_tflops", 0.5},
                            {"gemm_ceiling", {{"impl", "native"}, {"precision", "bf16"}, {"shape", "64x64x256"}, {"native_tflops", 0.5}, {"vendor_tflops", 0.4}}},
                            {"time_split_ms", {{"forward", 3.0}, {"backward", 6.0}, {"optimizer", 1.0}, {"comm_total", 2.0}, {"comm_exposed", 0.5}}},
                            {"pipeline", {{"bubble_measured", 0.21}, {"bubble_analytic", 0.2}, {"schedule", "gpipe"}, {"stages", 2}, {"microbatches", 4}, {"virtual_stages", 1}}},
                            {"straggler", {{"slowdown", 1.5}, {"delay", 0.25}, {"slowest_rank", 3}}},
                            {"memory", {{"estimated_bytes", 2e9}, {"peak_bytes", 2.5e9}}}};
  const std::string out = format_summary(s);
  EXPECT_EQ(out.rfind("FOM: 20480.0 tokens/s | step 12.500 ms", 0), 0u) << out;
  for (const char* part : {"forward 3.000 | backward 6.000 | optimizer 1.000 | communication 2.000 total, 0.500 exposed",
                           "0.210 measured, 0.200 analytic (gpipe, 2 stages, 4 micro-batches)",
                           "slowdown 1.500, delay 0.250, slowest rank 3", "estimated 2 GB, measured peak 2.5 GB",
                           "0.500 of the best GEMM measured (native bf16, 0.5 TFLOP/s at 64x64x256)",
                           "0.125 of the FMA peak measured (2 TFLOP/s)"})
    EXPECT_NE(out.find(part), std::string::npos) << part << " not in\n" << out;
  // A summary with fields missing (an older report) still prints, without inventing them.
  const std::string bare = format_summary({{"tokens_per_s", 1.0}});
  EXPECT_EQ(bare.rfind("FOM: 1.0 tokens/s", 0), 0u);
  EXPECT_EQ(bare.find("pipeline bubble"), std::string::npos);
}

TEST(Memory, ShardingShrinksTheEstimateAndTheLimitNamesWhatFits) {
  const MemoryEstimate one = deck({}, 4).memory;
  const MemoryEstimate z1 = deck({"parallel.zero=1"}, 4).memory;
  // ZeRO-3 keeps 1/dp of the parameters plus a pool of three gathered layers: it pays off once
  // the layers outnumber the pool.
  const MemoryEstimate z3 = deck({"parallel.zero=3", "model.n_layers=8"}, 4).memory;
  const MemoryEstimate z0 = deck({"model.n_layers=8"}, 4).memory;
  EXPECT_DOUBLE_EQ(z1.optimizer, one.optimizer / 4);
  EXPECT_LT(z3.params, z0.params);
  EXPECT_GT(deck({"train.micro_batch=4", "train.global_batch=8"}).memory.activations,
            deck({"train.micro_batch=2"}).memory.activations);
  // In bf16 a rank holds its shard as fp32 master and bf16 copy (6 S bytes) and a pool of three
  // gathered units in bf16 with their vectors widened (3 (2 L + 4 V)); in fp32 4 S and 3 x 4 L, so
  // 1.5 x fp32's - bf16's = 12 (L - V), L the largest unit and V the most vector elements of one
  // (both in elements, units padded to the 4 shards). Holding each gathered unit in fp32 as well
  // (6 L) would make it 0.
  const RunPlan z3_32 = deck({"parallel.zero=3", "model.n_layers=8"}, 4);
  const MemoryEstimate z3_16 = deck({"parallel.zero=3", "model.n_layers=8", "train.precision=bf16"}, 4).memory;
  std::map<int, std::int64_t> unit, vectors;
  for (const auto& t : rank_params(z3_32.shape, z3_32.chunks, 1, 0)) {
    unit[t.layer] += t.local_size(1);
    if (t.cols == 1) vectors[t.layer] += t.local_size(1);
  }
  std::int64_t L = 0, V = 0;
  for (const auto& [layer, n] : unit) L = std::max(L, (n + 3) / 4 * 4), V = std::max(V, vectors[layer]);
  EXPECT_DOUBLE_EQ(1.5 * z3_32.memory.params - z3_16.params, 12.0 * double(L - V));
  // A limit between the micro-batch 1 and 8 estimates: the message names the largest that fits.
  const double mb1 = deck({"train.micro_batch=1"}).memory.total();
  const double mb8 = deck({"train.micro_batch=8"}).memory.total();
  const double limit_gb = (mb1 + mb8) / 2 / 1e9;
  try {
    deck({"train.micro_batch=8", "memory.limit_gb=" + std::to_string(limit_gb)});
    FAIL() << "a layout over memory.limit_gb was accepted";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("memory.limit_gb="), std::string::npos) << m;
    EXPECT_NE(m.find("the largest train.micro_batch that fits is"), std::string::npos) << m;
  }
}
