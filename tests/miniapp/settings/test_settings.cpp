// The typed settings (miniapp/settings/): every closed set's enum names the schema's choices in
// the schema's order, so a choice added to one and not the other fails here, not in a run; and
// the reader carries each setting from the validated deck into its field.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "settings/config.hpp"
#include "settings/read_settings.hpp"
#include "settings/schema.hpp"
#include "settings/systems.hpp"
#include "settings/validate.hpp"

using namespace kformer;

namespace {

template <class E>
std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const char* n : Names<E>::list) out.push_back(n);
  return out;
}

std::vector<std::string> choices(const char* key) {
  const KeySpec* k = find_key(key);
  return k ? k->choices : std::vector<std::string>{"(no such key)"};
}

RunSettings read(const std::vector<std::string>& overrides, int world = 1) {
  Config c;
  for (const auto& o : overrides) c.apply_override(o);
  resolve_and_validate(c, world);
  return read_settings(c);
}

}  // namespace

// The schema's choices are made from the enums' name tables (choices.hpp): every name of a key,
// given in a deck, reaches its field as the enum value of that name, and a key left out takes its
// default (the first name, unless the schema names another).
template <class E, class Field>
void expect_round_trip(const char* key, Field field, const std::vector<std::string>& extra = {}, int world = 1,
                       E by_default = static_cast<E>(0)) {
  ASSERT_EQ(names<E>(), choices(key)) << key;
  for (std::size_t i = 0; i < names<E>().size(); ++i) {
    std::vector<std::string> given = extra;
    given.push_back(std::string(key) + "=" + names<E>()[i]);
    EXPECT_EQ(field(read(given, world)), static_cast<E>(i)) << key << "=" << names<E>()[i];
  }
  EXPECT_EQ(field(read(extra, world)), by_default) << key << " defaults to the schema's default";
}

TEST(Settings, EveryChoiceReachesItsEnumValue) {
  expect_round_trip<Family>("model.family", [](const RunSettings& s) { return s.model.family; });
  expect_round_trip<Precision>("train.precision", [](const RunSettings& s) { return s.train.precision; });
  expect_round_trip<Precision>("parallel.grad_reduce_dtype", [](const RunSettings& s) { return s.parallel.grad_reduce_dtype; },
                               {"parallel.dp=2"}, 2);
  expect_round_trip<Recompute>("train.recompute", [](const RunSettings& s) { return s.train.recompute; },
                               {"model.family=llama"});  // op is llama's
  ASSERT_EQ(names<ScheduleKind>(), choices("parallel.schedule"));
  for (std::size_t i = 0; i < names<ScheduleKind>().size(); ++i) {  // interleaved needs virtual stages
    const std::string name = names<ScheduleKind>()[i];
    const RunSettings s = read({"parallel.pp=2", "model.n_layers=4", "train.global_batch=8", "train.micro_batch=1",
                                "parallel.schedule=" + name, name == "interleaved" ? "parallel.virtual_stages=2" : "train.seed=1"}, 2);
    EXPECT_EQ(s.parallel.schedule, static_cast<ScheduleKind>(i)) << name;
  }
  expect_round_trip<GemmSetting>("kernels.gemm", [](const RunSettings& s) { return s.kernels.gemm; });
  expect_round_trip<AttentionModel>("predict.attention", [](const RunSettings& s) { return s.predict.attention; });
  expect_round_trip<PipelineP2p>("predict.pipeline_p2p", [](const RunSettings& s) { return s.predict.pipeline_p2p; });
  expect_round_trip<GradReduce>("predict.grad_reduce", [](const RunSettings& s) { return s.predict.grad_reduce; });
  expect_round_trip<Overlap>("predict.tp_comm", [](const RunSettings& s) { return s.predict.tp_comm; }, {}, 1,
                             Overlap::serialized);
  expect_round_trip<Overlap>("predict.param_gather", [](const RunSettings& s) { return s.predict.param_gather; }, {}, 1,
                             Overlap::serialized);
  expect_round_trip<Overlap>("predict.tp_input_grad", [](const RunSettings& s) { return s.predict.tp_input_grad; }, {}, 1,
                             Overlap::serialized);
  expect_round_trip<TpPrecision>("predict.tp_precision", [](const RunSettings& s) { return s.predict.tp_precision; }, {},
                                 1, TpPrecision::fp32);
  expect_round_trip<GradAccumulation>("predict.grad_accumulate", [](const RunSettings& s) { return s.predict.grad_accumulate; });
  expect_round_trip<BucketPass>("predict.bucket_pass", [](const RunSettings& s) { return s.predict.bucket_pass; });
  expect_round_trip<EmbeddingGrad>("predict.embedding_grad", [](const RunSettings& s) { return s.predict.embedding_grad; });
  expect_round_trip<HostCost>("predict.host", [](const RunSettings& s) { return s.predict.host; });
  // The settings after `auto` are the kinds, in the kinds' order (fixed_attention relies on it).
  const std::vector<std::string> settings = names<AttentionSetting>();
  EXPECT_EQ(settings, choices("kernels.attention"));
  EXPECT_EQ(std::vector<std::string>(settings.begin() + 1, settings.end()), names<AttentionKind>());
  EXPECT_THROW(parse_choice<ScheduleKind>("pipedream"), std::invalid_argument);
  EXPECT_EQ(parse_choice<ScheduleKind>("zb-h1"), ScheduleKind::zb_h1);
}

TEST(Settings, EachKeyReachesItsField) {
  const RunSettings d = read({});
  const RunSettings s = read({"model.family=llama", "model.n_heads=8", "model.n_kv_heads=2", "train.precision=bf16",
                              "train.recompute=full", "parallel.tp=2", "parallel.pp=2", "parallel.zero=3",
                              "parallel.grad_reduce_dtype=bf16", "parallel.sequence_parallel=true",
                              "parallel.schedule=gpipe", "kernels.gemm=vendor", "kernels.attention=naive",
                              "train.seed=77", "train.lr=0.5", "comm.emulate.latency_us=3", "comm.strict=true",
                              "checkpoint.every=4", "output.log_every=3", "straggler.rank=1", "memory.limit_gb=7",
                              "data.source=random", "predict.world=16", "parallel.stage_layers=1,1", "train.global_batch=16"},
                             16);
  EXPECT_EQ(d.model.family, Family::gpt);
  EXPECT_EQ(s.model.family, Family::llama);
  EXPECT_EQ(s.model.n_kv_heads, 2);
  EXPECT_EQ(s.train.precision, Precision::bf16);
  EXPECT_TRUE(s.bf16());
  EXPECT_EQ(s.train.recompute, Recompute::full);
  EXPECT_EQ(s.parallel.tp * s.parallel.pp * s.parallel.dp, 16);  // dp derived from the world
  EXPECT_EQ(s.parallel.zero, 3);
  EXPECT_EQ(s.parallel.grad_reduce_dtype, Precision::bf16);
  EXPECT_TRUE(s.parallel.sequence_parallel);
  EXPECT_FALSE(d.parallel.sequence_parallel);
  EXPECT_EQ(s.parallel.schedule, ScheduleKind::gpipe);
  EXPECT_EQ(s.parallel.stage_layers, (std::vector<int>{1, 1}));
  EXPECT_EQ(s.kernels.gemm, GemmSetting::vendor);
  EXPECT_EQ(s.kernels.attention, AttentionSetting::naive);
  EXPECT_EQ(fixed_attention(s.kernels.attention), AttentionKind::naive);
  EXPECT_EQ(d.kernels.attention, AttentionSetting::automatic);
  EXPECT_EQ(s.train.seed, 77u);
  EXPECT_EQ(s.train.lr, 0.5);
  EXPECT_EQ(s.comm.latency_us, 3.0);
  EXPECT_TRUE(s.comm.strict);
  EXPECT_EQ(s.checkpoint.every, 4);
  EXPECT_EQ(s.output.log_every, 3);
  EXPECT_EQ(s.straggler.rank, 1);
  EXPECT_EQ(s.memory_limit_gb, 7.0);
  EXPECT_EQ(s.predict.world, 16);
  EXPECT_NE(s.deck.text().find("parallel.zero"), std::string::npos);
  EXPECT_EQ(s.deck.json["parallel"]["zero"], 3);
}

// predict.system: a preset sets the predict.* keys of its software where neither the deck nor the
// command line gave them, shows them with its name as their origin, and leaves a given key alone.
TEST(Settings, ASoftwarePresetSetsItsKeysAndAGivenKeyKeepsItsValue) {
  const RunSettings megatron = read({"predict.system=megatron-lm-2022"});
  EXPECT_EQ(megatron.predict.system, "megatron-lm-2022");
  EXPECT_EQ(megatron.predict.memory, MemoryModel::megatron_lm);  // Korthikanti et al.'s count (software_memory.hpp)
  EXPECT_EQ(megatron.predict.attention, AttentionModel::batched_gemm);
  EXPECT_EQ(megatron.predict.pipeline_p2p, PipelineP2p::serialized);
  EXPECT_EQ(megatron.predict.grad_accumulate, GradAccumulation::fused);
  const std::string text = megatron.deck.text();
  EXPECT_NE(text.find("serialized   (predict.system=megatron-lm-2022)"), std::string::npos) << text;
  // Its published runs reduced gradients by layout (the SC21 scripts' --DDP-impl): PyTorch's DDP,
  // buckets during the backward, without a pipeline; its own DDP, after the backward, with one. A
  // given key still wins.
  EXPECT_EQ(megatron.predict.grad_reduce, GradReduce::overlapped);
  EXPECT_EQ(read({"predict.system=megatron-lm-2022", "parallel.pp=2"}, 2).predict.grad_reduce, GradReduce::serialized);
  EXPECT_EQ(read({"predict.system=megatron-lm-2022", "predict.grad_reduce=serialized"}).predict.grad_reduce,
            GradReduce::serialized);
  // Its own DDP divides the gradients by DP before reducing them; PyTorch's scales inside its copy.
  // A bf16 run accumulates its gradients in fp32, which only its own DDP takes: never PyTorch's.
  EXPECT_EQ(megatron.predict.bucket_pass, BucketPass::none);
  const RunSettings megatron_bf16 = read({"predict.system=megatron-lm-2022", "train.precision=bf16"});
  EXPECT_EQ(megatron_bf16.predict.grad_reduce, GradReduce::serialized);
  EXPECT_EQ(megatron_bf16.predict.bucket_pass, BucketPass::scale);
  EXPECT_EQ(read({"predict.system=megatron-lm-2022", "parallel.pp=2"}, 2).predict.bucket_pass, BucketPass::scale);
  EXPECT_EQ(read({"predict.system=megatron-core"}).predict.bucket_pass, BucketPass::nan_check_scale);
  EXPECT_EQ(read({"predict.system=megatron-core"}).predict.grad_reduce, GradReduce::delayed);  // delay_grad_reduce
  EXPECT_EQ(megatron.predict.embedding_grad, EmbeddingGrad::dense_main_grad);  // F.embedding, then its main_grad hook
  EXPECT_EQ(read({"predict.system=torchtitan"}).predict.embedding_grad, EmbeddingGrad::dense);
  // llm-foundry's MPT of 2023: FlashAttention's Triton kernel; Composer's FSDP gathers bf16 parameters,
  // so the residual stream is bf16, flash-attn's cross-entropy is one kernel each way (xentropy);
  // Composer updates MPT's two training metrics from each micro-batch's logits.
  const RunSettings mpt = read({"predict.system=llm-foundry-2023", "train.precision=bf16"});
  EXPECT_EQ(mpt.predict.attention, AttentionModel::triton);
  EXPECT_EQ(mpt.predict.residual, ResidualStream::activations);
  EXPECT_EQ(mpt.predict.loss, LossKernels::xentropy);
  EXPECT_EQ(mpt.predict.host, HostCost::eager);
  EXPECT_EQ(mpt.predict.embedding_grad, EmbeddingGrad::dense);
  EXPECT_EQ(mpt.predict.train_metrics, TrainMetrics::composer_lm);
  EXPECT_EQ(read({}).predict.train_metrics, TrainMetrics::none);
  EXPECT_EQ(mpt.predict.memory, MemoryModel::composer_mpt);  // Composer's FSDP1 holding MPT (software_memory.hpp)
  EXPECT_EQ(read({}).predict.memory, MemoryModel::kformer);

  const RunSettings given = read({"predict.system=deepspeed-2022", "predict.attention=flash"});
  EXPECT_EQ(given.predict.attention, AttentionModel::flash);  // the command line's
  EXPECT_EQ(given.predict.grad_accumulate, GradAccumulation::fp32_pass);  // the preset's

  const RunSettings plain = read({});
  EXPECT_EQ(plain.predict.system, "kformer");
  EXPECT_EQ(plain.predict.attention, AttentionModel::kformer);
  EXPECT_EQ(plain.predict.pipeline_p2p, PipelineP2p::overlapped);
  EXPECT_EQ(plain.predict.tp_comm, Overlap::serialized);  // kformer's TP calls hold its stream
  EXPECT_EQ(plain.predict.param_gather, Overlap::serialized);
  EXPECT_EQ(plain.predict.host, HostCost::kformer);
  EXPECT_EQ(plain.predict.tp_input_grad, Overlap::serialized);
  EXPECT_EQ(plain.predict.tp_precision, TpPrecision::fp32);  // kformer sums its TP partial products in fp32
  EXPECT_EQ(plain.predict.attention_dropout, 0.0);            // kformer has no dropout
  // Megatron-LM's attention drops its probabilities (--attention-dropout 0.1), as Megatron-DeepSpeed's
  // does; only Megatron-LM runs the input gradients' collectives beside the weight-gradient GEMMs.
  for (const char* sys : {"megatron-lm-2022", "deepspeed-2021", "deepspeed-2022"})
    EXPECT_EQ(read({std::string("predict.system=") + sys}).predict.attention_dropout, 0.1) << sys;
  EXPECT_EQ(read({"predict.system=megatron-lm-2022"}).predict.tp_input_grad, Overlap::overlapped);
  EXPECT_EQ(read({"predict.system=deepspeed-2022"}).predict.tp_input_grad, Overlap::serialized);
  // DeepSpeed's engine sends and receives one blocking call at a time (runtime/pipe/p2p.py); its forks
  // run Megatron's layer, whose residual stream is the model's bf16 with hidden dropout.
  for (const char* sys : {"deepspeed-2021", "deepspeed-2022"}) {
    const RunSettings ds = read({std::string("predict.system=") + sys});
    EXPECT_EQ(ds.predict.pipeline_calls, PipelineCalls::one_by_one) << sys;
    EXPECT_EQ(ds.predict.residual, ResidualStream::activations_dropout) << sys;
  }
  EXPECT_EQ(read({"predict.system=megatron-lm-2022"}).predict.pipeline_calls, PipelineCalls::grouped);
  const RunSettings core = read({"predict.system=megatron-core"});
  EXPECT_EQ(core.predict.tp_comm, Overlap::overlapped);
  // Megatron-Core's overlap_p2p_comm: on by default under interleaving, forced off otherwise; a given
  // key still wins.
  const std::vector<std::string> interleaved = {"predict.system=megatron-core", "parallel.pp=2", "model.n_layers=4",
                                                "parallel.schedule=interleaved", "parallel.virtual_stages=2"};
  const RunSettings core_v = read(interleaved, 2);
  EXPECT_EQ(core.predict.pipeline_p2p, PipelineP2p::serialized);
  EXPECT_EQ(core_v.predict.pipeline_p2p, PipelineP2p::prefetched);
  EXPECT_NE(core_v.deck.text().find("prefetched   (predict.system=megatron-core, interleaved)"), std::string::npos);
  std::vector<std::string> given_p2p = interleaved;
  given_p2p.push_back("predict.pipeline_p2p=overlapped");
  EXPECT_EQ(read(given_p2p, 2).predict.pipeline_p2p, PipelineP2p::overlapped);
  // Every other preset is an eager PyTorch program, unless the command line says otherwise.
  for (const SoftwareSystem& sys : software_systems())
    EXPECT_EQ(read({std::string("predict.system=") + sys.name}).predict.host,
              sys.name == std::string("kformer") ? HostCost::kformer : HostCost::eager)
        << sys.name;
  EXPECT_EQ(read({"predict.system=deepspeed-2022", "predict.host=blocking"}).predict.host, HostCost::blocking);
  EXPECT_EQ(core.predict.param_gather, Overlap::overlapped);
  // ezpz's fsdp_tp example and torchtitan both take F.cross_entropy over the model's widened logits.
  for (const char* sys : {"torchtitan", "pytorch-eager"})
    EXPECT_EQ(read({std::string("predict.system=") + sys}).predict.loss, LossKernels::cross_entropy) << sys;
  EXPECT_EQ(choices("predict.system"), software_system_names());
  // Every preset's keys are keys of the schema, each resolved to the preset's value with its origin.
  for (const SoftwareSystem& sys : software_systems()) {
    const std::string text = read({std::string("predict.system=") + sys.name}).deck.text();
    // without a pipeline in fp32: keys, then keys_with_pytorch_ddp over them, whose origin says so
    std::map<std::string, std::string> want;
    for (const auto& [key, value] : sys.keys) want[key] = std::string(value) + "   (predict.system=" + sys.name + ")";
    for (const auto& [key, value] : sys.keys_with_pytorch_ddp)
      want[key] = std::string(value) + "   (predict.system=" + sys.name + ", PyTorch's DDP)";
    for (const auto& [key, value] : want) {
      const std::size_t at = text.find("  " + key + " ");
      ASSERT_NE(at, std::string::npos) << sys.name << ": " << key;
      const std::string line = text.substr(at, text.find('\n', at) - at);
      EXPECT_NE(line.find("= " + value), std::string::npos) << line;
    }
  }
}
