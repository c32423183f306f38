// predict.memory=composer_mpt (predict/software_memory.hpp): what Composer's FSDP1 holds for MPT,
// against the bytes written out here for tiny.yaml's shape (4 layers, d 64, 4 heads, FFN 256,
// vocabulary 256, 32 positions), how each setting moves it, the report's peak and verdict, and the
// layouts it refuses. Part of test_predict_features.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "platform/errors.hpp"
#include "predict/key_costs.hpp"
#include "predict/largest_fit.hpp"
#include "predict/predict_report.hpp"
#include "predict/software_memory.hpp"
#include "predict/step_sim.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;

namespace {

// tiny.yaml on 4 FSDP ranks, one micro-batch of 2 x 32 tokens each, in bf16.
std::vector<std::string> mpt(std::vector<std::string> more) {
  std::vector<std::string> o = {"predict.world=4", "parallel.dp=4", "parallel.zero=3", "train.precision=bf16",
                                "train.recompute=none", "parallel.grad_reduce_dtype=bf16", "predict.memory=composer_mpt"};
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

kp::SoftwareMemory counted(const std::vector<std::string>& more) {
  const kformer::RunPlan p = plan("tiny.yaml", mpt(more));
  return kp::composer_mpt_memory(p.settings, p.shape);
}

double moment(const kp::SoftwareMemory& m, const std::string& name) {
  for (const auto& x : m.moments)
    if (x.name == name) return x.bytes;
  ADD_FAILURE() << "no moment " << name;
  return 0;
}

}  // namespace

// The parameters counted by hand: a block has its two LayerNorms (2 x 128), Q, K, V (3 x 64 x 64 and
// 3 x 64 biases), the output projection (64 x 64 + 64), the FFN (2 x 64 x 256, biases 256 and 64):
// 49984; the root unit the token embedding (256 x 64, the head's too), the positions (32 x 64) and
// the final norm (128): 18560. A token of a block keeps 2 (6 x 64 + 2 x 64 + 2 x 256) bytes of bf16
// tensors, 16 of LayerNorm statistics and 4 x 4 of log-sum-exp: 2080.
TEST(PredictSoftwareMemory, ComposerMptHoldsTheBytesWrittenOut) {
  const double block = 49984, root = 18560, params = root + 4 * block, N = 2 * 32, V = 256, d = 64, F = 256;
  const kp::SoftwareMemory m = counted({});
  EXPECT_DOUBLE_EQ(m.states, 16 * params / 4);
  EXPECT_DOUBLE_EQ(m.root_unit, 2 * root);
  EXPECT_DOUBLE_EQ(m.block_unit, 2 * block);
  EXPECT_DOUBLE_EQ(m.saved_per_token, 4 * 2080);
  EXPECT_DOUBLE_EQ(m.logits, 2 * V * N);
  const double held = 16 * params / 4 + 2 * root + 2 * (2 * block) + 4 * 2080 * N;
  EXPECT_DOUBLE_EQ(moment(m, "head_backward"), held + 2 * 2 * d * N + 2 * (2 * V * N) + 2 * root);
  EXPECT_DOUBLE_EQ(moment(m, "last_block_backward"), held + 2 * root + 2 * V * N + 2 * block + 2 * (2 * F + d) * N);
  EXPECT_DOUBLE_EQ(moment(m, "train_metrics"), 16 * params / 4 + 2 * V * N + 8 * V * N);
  EXPECT_EQ(m.peak().name, "last_block_backward");
}

// Each setting moves what the header says it moves, and nothing else.
TEST(PredictSoftwareMemory, EachSettingMovesItsOwnPart) {
  const double block = 49984, N = 2 * 32, d = 64;
  const kp::SoftwareMemory base = counted({});
  // Activation checkpointing: a block keeps only its input, and the block whose backward runs holds
  // its tensors again.
  const kp::SoftwareMemory ckpt = counted({"train.recompute=full"});
  EXPECT_DOUBLE_EQ(ckpt.saved_per_token, 4 * 2 * d);
  EXPECT_DOUBLE_EQ(moment(ckpt, "last_block_backward") - moment(base, "last_block_backward"),
                   (4 * 2 * d - 4 * 2080) * N + 2080 * N);
  EXPECT_DOUBLE_EQ(moment(ckpt, "train_metrics"), moment(base, "train_metrics"));
  // SHARD_GRAD_OP keeps every block gathered from its forward to its backward, FULL_SHARD two.
  const kp::SoftwareMemory sgo = counted({"parallel.zero=2"});
  EXPECT_DOUBLE_EQ(moment(sgo, "head_backward") - moment(base, "head_backward"), (4 - 2) * 2 * block);
  EXPECT_DOUBLE_EQ(sgo.states, base.states);
  // A reduce in fp32 widens the block's unsharded gradient for the reduce-scatter.
  EXPECT_DOUBLE_EQ(moment(counted({"parallel.grad_reduce_dtype=fp32"}), "last_block_backward") -
                       moment(base, "last_block_backward"),
                   4 * block);
  // Twice the ranks, half the states; twice the micro-batch, twice each token's part.
  EXPECT_DOUBLE_EQ(counted({"parallel.dp=8", "predict.world=8", "train.global_batch=16"}).states, base.states / 2);
  const kp::SoftwareMemory twice = counted({"train.micro_batch=4", "train.global_batch=16"});
  EXPECT_DOUBLE_EQ(moment(twice, "train_metrics") - moment(base, "train_metrics"), (2 + 8) * 256 * N);
  // In fp32 every activation and gathered parameter is 4 bytes, and the metrics only add log_softmax's output.
  const kp::SoftwareMemory fp32 = counted({"train.precision=fp32", "parallel.grad_reduce_dtype=fp32"});
  EXPECT_DOUBLE_EQ(fp32.block_unit, 2 * base.block_unit);
  EXPECT_DOUBLE_EQ(moment(fp32, "train_metrics"), fp32.states + 4 * 256 * N + 4 * 256 * N);
}

// The report's peak is the software's (with the profile's process baseline) and its verdict follows it:
// with memory.limit_gb between the two peaks, the layout fits as Composer holds it and not as kformer's
// own step would; kformer's own peak stays in the report beside it.
TEST(PredictSoftwareMemory, TheReportsPeakAndVerdictAreTheSoftwares) {
  const auto a100 = profile("dgx-a100-80gb");
  const auto report = [&](const std::vector<std::string>& more) {
    const kformer::RunPlan p = plan("gpt3-small.yaml", mpt(more));
    return kp::predict_report(p, a100, kp::predict_step(p, a100, false))["summary"]["memory"];
  };
  const auto mem = report({});
  const double own = mem["kformer_peak_bytes"].get<double>(), sw = mem["peak_bytes"].get<double>();
  EXPECT_EQ(mem["counted_as"], "composer_mpt");
  EXPECT_DOUBLE_EQ(sw, mem["software"]["peak_bytes"].get<double>() + a100.process_baseline_gb * 1e9);
  ASSERT_LT(sw, own);
  const std::string between = "memory.limit_gb=" + std::to_string((sw + own) / 2e9);
  EXPECT_TRUE(report({between})["fits"].get<bool>());
  EXPECT_FALSE(report({between, "predict.memory=kformer"})["fits"].get<bool>());
}

// Layouts Composer's MPT runs never had get one line naming the key, the cause and the fix.
TEST(PredictSoftwareMemory, LayoutsItDoesNotDescribeAreRefused) {
  for (const auto& [more, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"model.family=llama"}, "model.family=llama"},
           {{"parallel.tp=2", "predict.world=8"}, "parallel.tp=1 parallel.pp=1"},
           {{"parallel.zero=1"}, "not parallel.zero=1 over parallel.dp=4"},
           {{"train.recompute=selective"}, "not train.recompute=selective"},
           {{"predict.memory=megatron_lm", "model.family=llama"}, "Megatron-LM's GPT layers"},
           {{"predict.memory=megatron_lm"}, "not parallel.zero=3's parameters"},
           {{"predict.memory=megatron_lm", "parallel.pp=2", "predict.world=8", "train.global_batch=16", "parallel.schedule=gpipe"},
            "not parallel.schedule=gpipe"}}) {
    try {
      plan("tiny.yaml", mpt(more));
      ADD_FAILURE() << says << ": not refused";
    } catch (const kformer::ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(says), std::string::npos) << what;
      EXPECT_NE(what.find("predict.memory=kformer"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  try {  // set by the preset, the line says so
    plan("tiny.yaml", {"predict.system=llm-foundry-2023", "train.precision=bf16", "train.recompute=selective"});
    ADD_FAILURE() << "the preset's count on selective recomputation: not refused";
  } catch (const kformer::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(from predict.system=llm-foundry-2023)"), std::string::npos) << e.what();
  }
}

namespace {

// tiny.yaml (4 layers, h 64, a 4 heads, FFN 256 = 4h, s 32, b 2) in bf16 as the megatron-lm-2022 preset
// costs it (its fused-softmax attention with dropout 0.1, predict.memory=megatron_lm).
kp::SoftwareMemory megatron(const std::vector<std::string>& more) {
  std::vector<std::string> o = {"train.precision=bf16", "predict.system=megatron-lm-2022"};
  o.insert(o.end(), more.begin(), more.end());
  const kformer::RunPlan p = plan("tiny.yaml", o);
  EXPECT_EQ(p.settings.predict.memory, kformer::MemoryModel::megatron_lm);
  return kp::megatron_lm_memory(p.settings, p.shape);
}

}  // namespace

// A layer keeps what Korthikanti et al. count, as the paper writes it (bytes a layer and micro-batch,
// s b h a token each, t TP ranks): sbh (10 + 24/t + 5as/(ht)) with TP alone, sbh/t (34 + 5as/h) with
// sequence parallelism, 34 sbh/t under selective recomputation, 2 sbh (2 sbh/t) under full.
TEST(PredictSoftwareMemory, MegatronLmLayersKeepKorthikantisCount) {
  const double s = 32, h = 64, a = 4, t = 2;
  const std::vector<std::string> tp2 = {"predict.world=2", "parallel.tp=2", "train.recompute=none"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), tp2.begin(), tp2.end());
    return megatron(more).saved_per_token;  // bytes a token of the micro-batch, one layer
  };
  EXPECT_DOUBLE_EQ(with({}), h * (10 + 24 / t + 5 * a * s / (h * t)));
  EXPECT_DOUBLE_EQ(with({"parallel.sequence_parallel=true"}), h / t * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(with({"parallel.sequence_parallel=true", "train.recompute=selective"}), 34 * h / t);
  EXPECT_DOUBLE_EQ(with({"train.recompute=selective"}), h * (10 + 24 / t));
  EXPECT_DOUBLE_EQ(with({"train.recompute=full"}), 2 * h);
  EXPECT_DOUBLE_EQ(with({"parallel.sequence_parallel=true", "train.recompute=full"}), 2 * h / t);
  // Without attention dropout the probabilities are kept once (2as, not 5as); a flash kernel keeps none.
  EXPECT_DOUBLE_EQ(with({"predict.attention_dropout=0"}), h * (10 + 24 / t) + 2 * a * s / t);
  EXPECT_DOUBLE_EQ(with({"predict.attention=flash"}), h * (10 + 24 / t));
}

// A stage holds the micro-batches Megatron's schedules warm up, 18 bytes a parameter of its own (2 +
// 4 + 12/dp with the distributed optimizer), the first its embedding's dropout mask and the last the
// loss's fp32 logits.
TEST(PredictSoftwareMemory, MegatronLmStagesHoldTheirWarmUp) {
  const double N = 2 * 32, h = 64, V = 256;
  // 4 stages of one layer, 8 micro-batches under 1F1B: stage r holds 4 - r of them.
  const kp::SoftwareMemory p4 = megatron({"predict.world=4", "parallel.pp=4", "train.global_batch=16", "train.recompute=full"});
  ASSERT_EQ(p4.moments.size(), 4u);
  const double layer = 2 * h * N, rerun = h * (34 + 5 * 4 * 32 / h) * N;
  const double block = 49984, embed = 256 * 64 + 32 * 64, final_norm = 128;
  EXPECT_DOUBLE_EQ(p4.moments[0].bytes, 18 * (embed + block) + 4 * layer + 4 * h * N + rerun);
  EXPECT_DOUBLE_EQ(p4.moments[1].bytes, 18 * block + 3 * layer + rerun);
  EXPECT_DOUBLE_EQ(p4.moments[2].bytes, 18 * block + 2 * layer + rerun);
  EXPECT_DOUBLE_EQ(p4.moments[3].bytes, 18 * (block + 256 * 64 + 32 * 64 + final_norm) + 1 * layer + 2 * h * N +
                                            (4 + 2) * V * N + rerun);
  // Interleaved, 2 stages of 2 chunks of one layer, 4 micro-batches: stage 0 warms up (2-0-1) 2 + (2-1) 2
  // chunk-micro-batches and holds one more; stage 1, 2 + 1.
  const kp::SoftwareMemory il = megatron({"predict.world=2", "parallel.pp=2", "parallel.schedule=interleaved",
                                          "parallel.virtual_stages=2", "train.global_batch=8", "train.recompute=full"});
  EXPECT_DOUBLE_EQ(il.moments[0].bytes, 18 * (embed + 2 * block) + 5 * layer + 5.0 / 2 * h * N + rerun);
  EXPECT_DOUBLE_EQ(il.moments[1].bytes, 18 * (2 * block + embed + final_norm) + 3 * layer + 2 * h * N + 6 * V * N + rerun);
  // The distributed optimizer shards the fp32 masters and moments over DP.
  const kp::SoftwareMemory dist = megatron({"predict.world=4", "parallel.dp=4", "parallel.zero=1", "train.global_batch=8"});
  EXPECT_DOUBLE_EQ(dist.states, (2 + 4 + 12.0 / 4) * (embed + 4 * block + final_norm));
}

// predict.largest_micro_batch: with the device's bytes set between the peaks of micro-batches 4 and 8
// (each predicted alone; the attention kernel given, so that the limit does not choose it), the search
// over the divisors of the 16 sequences a rank takes finds 4; with
// room for 16, 16; with none for 1, none. Under Composer's count and under kformer's own.
TEST(PredictSoftwareMemory, TheLargestMicroBatchThatFitsIsFound) {
  const auto a100 = profile("dgx-a100-80gb");
  for (const std::string memory : {"composer_mpt", "kformer"}) {
    const std::vector<std::string> base = {kSource + "/input/gpt3-small.yaml", "predict.world=2", "parallel.dp=2",
                                           "parallel.zero=3", "train.precision=bf16", "train.recompute=none",
                                           "train.global_batch=32", "kernels.attention=fused", "predict.memory=" + memory};
    const auto peak = [&](int mb) {
      std::vector<std::string> a = base;
      a.push_back("train.micro_batch=" + std::to_string(mb));
      kformer::RunPlan p = kp::costed_layout(kformer::read_prediction_deck("predict", a, false).settings, a100);
      if (memory == "kformer") p = kformer::with_memory(p);
      return kp::predicted_peak_bytes(p, a100);
    };
    const auto search = [&](double limit_gb) {
      std::vector<std::string> a = base;
      a.push_back("memory.limit_gb=" + std::to_string(limit_gb));
      return kp::largest_fitting_micro_batch(a, kformer::read_prediction_deck("predict", a, false).settings, a100);
    };
    const double p1 = peak(1), p4 = peak(4), p8 = peak(8), p16 = peak(16);
    ASSERT_LT(p4, p8) << memory;
    const kp::LargestFit four = search((p4 + p8) / 2e9);
    EXPECT_EQ(four.local_batch, 16) << memory;
    EXPECT_EQ(four.micro_batch, 4) << memory;
    EXPECT_DOUBLE_EQ(four.peak_bytes, p4) << memory;
    EXPECT_EQ(search(p16 * 1.01 / 1e9).micro_batch, 16) << memory;
    const kp::LargestFit none = search(p1 * 0.99 / 1e9);
    EXPECT_EQ(none.micro_batch, 0) << memory;
    EXPECT_NE(none.text().find("none: micro-batch 1"), std::string::npos) << none.text();
  }
}
