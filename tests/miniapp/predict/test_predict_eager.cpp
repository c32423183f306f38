// How eager PyTorch programs' own operators are costed (the torchtitan and pytorch-eager presets'
// predict.* keys; docs/predict.md, "Systems"): an RMSNorm, RoPE, repeated K/V heads and SwiGLU as
// eager operators, the loss over the logits as PyTorch's or Megatron-LM's operators, and ezpz's
// logits gathered whole to every TP rank, each against the costs written out here. Part of
// test_predict_features.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "predict/chunk_work.hpp"
#include "predict/kernel_costs.hpp"
#include "predict/machine_profile.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;

namespace {
// tiny's one chunk in `precision` with one predict.* key set, costed on `p`.
kp::ChunkWork tiny_with(const kp::MachineProfile& p, const std::string& precision, const std::string& key_value) {
  return kp::chunk_work(p, plan("tiny.yaml", {"train.precision=" + precision, key_value}), 0);
}
}  // namespace

// predict.rmsnorm=eager (torchtitan's RMSNorm module as eager PyTorch runs it): every RMSNorm call,
// forward and backward, the blocks' and the final one, costs its operators' kernels and bytes
// (kernel_costs.hpp: 8 kernels and 36 bytes an element forward, 14 and 92 backward), written out
// here from the rows and channels; every other call costs what it does fused; gpt's LayerNorm is
// not an RMSNorm and keeps its cost.
TEST(PredictFeatures, AnEagerRmsNormCostsItsOperatorsKernelsAndBytes) {
  const auto a100 = profile("dgx-a100-80gb");
  const auto chunk = [&](const std::string& family, const std::string& norm) {
    return kp::chunk_work(a100, plan("tiny.yaml", {"model.family=" + family, "predict.rmsnorm=" + norm}), 0);
  };
  const kp::ChunkWork fused = chunk("llama", "fused"), eager = chunk("llama", "eager");
  const auto d = plan("tiny.yaml", {"model.family=llama"}).dims;
  const double elements = double(d.rows()) * d.C, rate = a100.memory_gbps.at("activation") * 1e3;  // bytes per us
  const auto want = [&](int kernels, double bytes) { return (kernels * a100.launch_us + bytes * elements / rate) * a100.compute_scale; };
  int norms = 0;
  const std::vector<std::pair<const std::vector<kp::WorkItem>*, const std::vector<kp::WorkItem>*>> pairs = {
      {&fused.forward, &eager.forward}, {&fused.head_backward, &eager.head_backward}, {&fused.backward, &eager.backward}};
  for (const auto& [lists, eager_list] : pairs) {
    const auto& other = *eager_list;
    ASSERT_EQ(lists->size(), other.size());
    for (std::size_t i = 0; i < lists->size(); ++i) {
      const kp::WorkItem &a = (*lists)[i], &b = other[i];
      ASSERT_EQ(a.name, b.name);
      if (a.name == "rmsnorm_forward" || a.name == "rmsnorm_backward") {
        const bool backward = a.name == "rmsnorm_backward";
        EXPECT_NEAR(b.us, backward ? want(14, 92) : want(8, 36), 1e-9 * b.us) << a.name;
        EXPECT_GT(b.us, a.us) << a.name;
        ++norms;
      } else {
        EXPECT_EQ(a.us, b.us) << a.name;
      }
    }
  }
  EXPECT_EQ(norms, 2 * (2 * 4 + 1));  // forward and backward of two norms a block, four blocks, the final norm
  // (the final norm's backward in the head's backward, which the last chunk runs in its forward call)
  EXPECT_EQ(sum(chunk("gpt", "eager").forward, kp::ItemKind::compute),
            sum(chunk("gpt", "fused").forward, kp::ItemKind::compute));
}

// predict.pointwise=eager (torchtitan's Llama without torch.compile): each RoPE call costs Q's and
// K's widening, complex product and narrowing (3 kernels a tensor, 20 bytes a rotated element in
// bf16), each SwiGLU call silu and the product (2 kernels, 10 bytes an output element; backward 3
// and 18), and each attention call with fewer K/V heads than Q heads repeat_kv's two copies (or
// their sums) of K and V, (kv + h) heads' bytes each, on top of its own cost: all written out here
// from the block's dimensions. Every other call keeps its cost; gpt, with neither, is unchanged.
TEST(PredictFeatures, EagerPointwiseCostsRopeRepeatedHeadsAndSwiGluAsOperators) {
  const auto a100 = profile("dgx-a100-80gb");
  const std::vector<std::string> llama = {"model.family=llama", "model.n_kv_heads=2", "train.precision=bf16"};
  const auto chunk = [&](std::vector<std::string> keys, const std::string& pointwise) {
    keys.push_back("predict.pointwise=" + pointwise);
    return kp::chunk_work(a100, plan("tiny.yaml", keys), 0);
  };
  const kp::ChunkWork fused = chunk(llama, "fused"), eager = chunk(llama, "eager");
  const auto d = plan("tiny.yaml", llama).dims;
  ASSERT_LT(d.KVl, d.Hl);
  const double rate = a100.memory_gbps.at("activation") * 1e3;  // bytes per us
  const auto want = [&](int kernels, double bytes) { return (kernels * a100.launch_us + bytes / rate) * a100.compute_scale; };
  const double rows = d.N(), rotated = rows * (d.Hl + d.KVl) * d.hd, gated = rows * d.Fl;
  const double repeat = want(2, 2 * rows * d.hd * (d.KVl + d.Hl) * 2);
  std::map<std::string, int> seen;
  const std::vector<std::pair<const std::vector<kp::WorkItem>*, const std::vector<kp::WorkItem>*>> pairs = {
      {&fused.forward, &eager.forward}, {&fused.head_backward, &eager.head_backward}, {&fused.backward, &eager.backward}};
  for (const auto& [lists, eager_list] : pairs) {
    ASSERT_EQ(lists->size(), eager_list->size());
    for (std::size_t i = 0; i < lists->size(); ++i) {
      const kp::WorkItem &a = (*lists)[i], &b = (*eager_list)[i];
      ASSERT_EQ(a.name, b.name);
      const std::string n = a.name;
      if (n == "rope_forward" || n == "rope_backward") {
        EXPECT_NEAR(b.us, want(6, 20 * rotated), 1e-9 * b.us) << n;
      } else if (n == "swiglu_forward") {
        EXPECT_NEAR(b.us, want(2, 10 * gated), 1e-9 * b.us) << n;
      } else if (n == "swiglu_backward") {
        EXPECT_NEAR(b.us, want(3, 18 * gated), 1e-9 * b.us) << n;
      } else if (n == "attention_forward" || n == "attention_backward") {
        EXPECT_NEAR(b.us - a.us, repeat, 1e-9 * b.us) << n;
      } else {
        EXPECT_EQ(a.us, b.us) << n;
        continue;
      }
      EXPECT_GT(b.us, a.us) << n;
      ++seen[n];
    }
  }
  for (const char* n : {"rope_forward", "rope_backward", "swiglu_forward", "swiglu_backward", "attention_forward",
                        "attention_backward"})
    EXPECT_EQ(seen[n], 4) << n;  // one a block, four blocks
  // Under train.recompute=op torchtitan keeps SDPA's output, not its inputs: each attention backward
  // also re-runs Q's RoPE (3 kernels, 20 bytes a rotated element) and repeat_kv's copies.
  std::vector<std::string> op = llama;
  op.push_back("train.recompute=op");
  const kp::ChunkWork op_fused = chunk(op, "fused"), op_eager = chunk(op, "eager");
  int backwards = 0;
  for (std::size_t i = 0; i < op_fused.backward.size(); ++i)
    if (op_fused.backward[i].name == "attention_backward") {
      EXPECT_NEAR(op_eager.backward[i].us - op_fused.backward[i].us, 2 * repeat + want(3, 20 * rows * d.Hl * d.hd),
                  1e-9 * op_eager.backward[i].us);
      ++backwards;
    }
  EXPECT_EQ(backwards, 4);
  // fp32 activations: `.float()` and `type_as` are no-ops, so RoPE is the complex product alone (a
  // kernel and 8 bytes a rotated element a tensor); SwiGLU moves 4-byte elements.
  kformer::kernels::KernelCall c;
  c.family = kformer::kernels::Family::rope;
  c.shape = {64, 6, 16, 0, 0, 0};
  kp::CallCosts eager_ops;
  eager_ops.eager_pointwise = true;
  EXPECT_NEAR(kp::kernel_us(a100, c, eager_ops), want(2, 8 * 64 * 6 * 16) / a100.compute_scale, 1e-9);
  c.family = kformer::kernels::Family::activation, c.name = "swiglu_backward", c.backward = true;
  c.shape = {64, 96, 0, 0, 0, 0};
  EXPECT_NEAR(kp::kernel_us(a100, c, eager_ops), want(3, 36 * 64 * 96) / a100.compute_scale, 1e-9);
  const std::vector<std::string> gpt = {"train.precision=bf16"};
  EXPECT_EQ(sum(chunk(gpt, "eager").forward, kp::ItemKind::compute), sum(chunk(gpt, "fused").forward, kp::ItemKind::compute));
  EXPECT_EQ(sum(chunk(gpt, "eager").backward, kp::ItemKind::compute), sum(chunk(gpt, "fused").backward, kp::ItemKind::compute));
}

// predict.loss (the loss over the logits as eager operators, kernel_costs.hpp): Megatron-LM's
// vocab-parallel cross-entropy moves 52 bytes a logit in bf16 (40 in fp32) in 8 kernels (6), PyTorch's
// F.cross_entropy 36 (24) in 7 (5), flash-attn's fused kernels 6 (12) in 2, all put on kformer's one pass over whole rows (one rank holds the
// vocabulary; split over TP they spread over its three passes); written out here from the logits the
// head holds. No other call changes, and kformer's own (fused) is the default.
TEST(PredictFeatures, AnEagerLossCostsItsOperatorsBytesOverTheLogits) {
  const auto a100 = profile("dgx-a100-80gb");
  const double rate = a100.memory_gbps.at("activation") * 1e3;  // bytes per us
  for (const std::string precision : {"bf16", "fp32"}) {
    const bool bf16 = precision == "bf16";
    const auto chunk = [&](const std::string& loss) { return tiny_with(a100, precision, "predict.loss=" + loss); };
    const kp::ChunkWork fused = chunk("fused");
    const auto d = plan("tiny.yaml", {}).dims;
    const double logits = double(d.N()) * 256;  // tiny's vocabulary, one rank
    // flash-attn's fused kernels (xentropy) stream at the profile's cross_entropy rate, the eager
    // operators at its activation rate
    const double xent_rate = a100.memory_gbps.at("cross_entropy") * 1e3;
    using Case = std::tuple<std::string, int, double, double>;  // loss, kernels, bytes a logit, bytes per us
    for (const auto& [loss, kernels, bytes, bytes_per_us] :
         std::vector<Case>{{"vocab_parallel", bf16 ? 8 : 6, bf16 ? 52 : 40, rate},
                           {"cross_entropy", bf16 ? 7 : 5, bf16 ? 36 : 24, rate},
                           {"xentropy", 2, bf16 ? 6 : 12, xent_rate}}) {
      const kp::ChunkWork eager = chunk(loss);
      double passes = 0;
      int seen = 0;
      for (const auto& [a_list, b_list] : {std::pair{&fused.forward, &eager.forward},
                                           std::pair{&fused.head_backward, &eager.head_backward},
                                           std::pair{&fused.backward, &eager.backward}}) {
        ASSERT_EQ(a_list->size(), b_list->size());
        for (std::size_t i = 0; i < a_list->size(); ++i) {
          const std::string n = (*a_list)[i].name;
          if (n == "xent_whole_rows")  // one rank: kformer's one pass, costed as the software's operators
            passes += (*b_list)[i].us, ++seen;
          else
            EXPECT_EQ((*a_list)[i].us, (*b_list)[i].us) << n;
        }
      }
      EXPECT_EQ(seen, 1) << loss;
      EXPECT_NEAR(passes, (kernels * a100.launch_us + bytes * logits / bytes_per_us) * a100.compute_scale, 1e-9 * passes)
          << loss << " " << precision;
    }
  }
}

// predict.train_metrics=composer_lm (Composer's two training metrics over each micro-batch's logits,
// kernel_costs.hpp): one item more, right after the loss's last pass in the head's backward, costing
// 2 x (7 kernels, 14 bytes a logit) in bf16 and 2 x (6, 8) in fp32, plus 3 launches for the labels'
// shift, written out here; every other item as it was.
TEST(PredictFeatures, ComposersTrainingMetricsCostTwoEagerCrossEntropiesAfterTheLoss) {
  const auto a100 = profile("dgx-a100-80gb");
  const double rate = a100.memory_gbps.at("activation") * 1e3;  // bytes per us
  for (const std::string precision : {"bf16", "fp32"}) {
    const bool bf16 = precision == "bf16";
    const auto chunk = [&](const std::string& metrics) {
      return tiny_with(a100, precision, "predict.train_metrics=" + metrics);
    };
    const kp::ChunkWork none = chunk("none"), composer = chunk("composer_lm");
    const auto d = plan("tiny.yaml", {}).dims;
    const double logits = double(d.N()) * 256;  // tiny's vocabulary, one rank
    ASSERT_EQ(composer.head_backward.size(), none.head_backward.size() + 1) << precision;
    const auto at = std::find_if(composer.head_backward.begin(), composer.head_backward.end(),
                                 [](const kp::WorkItem& i) { return i.name == "train_metrics"; });
    ASSERT_NE(at, composer.head_backward.begin());
    EXPECT_EQ(std::prev(at)->name, "xent_whole_rows") << "right after the loss";
    const int kernels = 2 * (bf16 ? 7 : 6) + 3;
    const double bytes = 2 * (bf16 ? 14 : 8);
    EXPECT_NEAR(at->us, (kernels * a100.launch_us + bytes * logits / rate) * a100.compute_scale, 1e-9 * at->us) << precision;
    std::vector<kp::WorkItem> rest = composer.head_backward;
    rest.erase(rest.begin() + (at - composer.head_backward.begin()));
    for (std::size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i].us, none.head_backward[i].us) << rest[i].name;
    for (const auto& [a, b] : {std::pair{&none.forward, &composer.forward}, std::pair{&none.backward, &composer.backward}}) {
      ASSERT_EQ(a->size(), b->size());
      for (std::size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].us, (*b)[i].us) << (*a)[i].name;
    }
  }
}

// predict.logits=gathered (ezpz's plan: the output layer's ColwiseParallel(output_layouts=Replicate())):
// at TP 2 the forward all-gathers the logits in the run's precision before the loss, and the loss's
// three passes cost what they cost one rank holding the whole vocabulary (a vocabulary of 65536, so
// that bytes, not launches, set them); nothing else changes, and at TP 1 there is nothing to gather.
TEST(PredictFeatures, GatheredLogitsCostAnAllGatherAndTheWholeVocabularysLoss) {
  const auto a100 = profile("dgx-a100-80gb");
  const auto chunk = [&](int tp, const std::string& logits) {
    return kp::chunk_work(a100, plan("tiny.yaml", {"predict.world=" + std::to_string(tp), "parallel.tp=" + std::to_string(tp),
                                                   "train.precision=bf16", "predict.loss=cross_entropy",
                                                   "model.vocab_size=65536", "predict.logits=" + logits}),
                          0);
  };
  const auto passes = [](const kp::ChunkWork& w) {
    double us = 0;
    for (const auto* list : {&w.forward, &w.head_backward, &w.backward})
      for (const auto& i : *list)
        if (i.name == std::string("xent_local_max") || i.name == std::string("xent_local_sums") ||
            i.name == std::string("xent_finish") || i.name == std::string("xent_whole_rows"))
          us += i.us;
    return us;
  };
  const kp::ChunkWork sharded = chunk(2, "sharded"), gathered = chunk(2, "gathered"), whole = chunk(1, "sharded");
  const auto d = plan("tiny.yaml", {}).dims;
  const auto s_tp = of_kind(sharded.forward, kp::ItemKind::tp_comm), g_tp = of_kind(gathered.forward, kp::ItemKind::tp_comm);
  ASSERT_EQ(g_tp.size(), s_tp.size() + 1);
  double extra = bytes_of(g_tp) - bytes_of(s_tp);
  EXPECT_NEAR(extra, double(d.N()) * 65536 * 2, 1e-9) << "the whole (tokens, vocabulary) logits in bf16";
  const auto gather = std::find_if(gathered.forward.begin(), gathered.forward.end(),
                                   [](const kp::WorkItem& i) { return i.name == std::string("xent_local_max"); });
  ASSERT_NE(gather, gathered.forward.begin());
  EXPECT_EQ(std::prev(gather)->kind, kp::ItemKind::tp_comm) << "the gather comes right before the loss";
  EXPECT_EQ(std::prev(gather)->op, kformer::comm::OpKind::allgather);
  EXPECT_NEAR(passes(gathered), passes(whole), 1e-9 * passes(whole)) << "the loss over the whole vocabulary";
  EXPECT_LT(passes(sharded), 0.75 * passes(gathered));
  // every other kernel as it was, in the same order
  for (const auto& [a_list, b_list] : {std::pair{&sharded.forward, &gathered.forward},
                                       std::pair{&sharded.head_backward, &gathered.head_backward},
                                       std::pair{&sharded.backward, &gathered.backward}}) {
    const auto a = of_kind(*a_list, kp::ItemKind::compute), b = of_kind(*b_list, kp::ItemKind::compute);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      if (a[i].name.rfind("xent_", 0) != 0) EXPECT_EQ(a[i].us, b[i].us) << a[i].name;
    }
  }
  const kp::ChunkWork one = chunk(1, "gathered");
  EXPECT_EQ(one.forward.size(), whole.forward.size());
  EXPECT_EQ(passes(one), passes(whole));
}
