// The software presets of predict.system (see systems.hpp).
#include "settings/systems.hpp"

#include <stdexcept>

#include "settings/config.hpp"

namespace kformer {

const std::vector<SoftwareSystem>& software_systems() {
  // Keys left out keep kformer's behaviour (attention kformer, sends and buckets overlapped,
  // weight gradients added inside the GEMM, C++ launches). Every other preset is an eager PyTorch
  // program: predict.host=eager.
  static const std::vector<SoftwareSystem> systems = {
      {"kformer", "kformer, as kernels.attention and kernels.gemm would choose on the machine", {}},
      {"megatron-lm-2022",
       "Megatron-LM of 2021-22 as NVIDIA's published runs ran it (fused softmax attention, sends on the compute "
       "stream; its own DDP, the fp32 gradients divided by DP and reduced after the backward; without a pipeline in "
       "fp16 or fp32 PyTorch's DDP, buckets reduced during the last backward)",
       {{"predict.attention", "batched_gemm"}, {"predict.pipeline_p2p", "serialized"}, {"predict.grad_reduce", "serialized"},
        {"predict.attention_dropout", "0.1"}, {"predict.tp_input_grad", "overlapped"},
        {"predict.loss", "vocab_parallel"}, {"predict.residual", "activations_dropout"}, {"predict.host", "eager"},
        {"predict.bucket_pass", "scale"}, {"predict.embedding_grad", "dense_main_grad"}, {"predict.memory", "megatron_lm"}},
       {{"predict.grad_reduce", "overlapped"}, {"predict.bucket_pass", "none"}}},
      {"megatron-core",
       "Megatron-Core as NVIDIA's published configurations run it (Transformer Engine's cuDNN flash attention, "
       "--overlap-grad-reduce with each bucket's NaN check and scaling, --overlap-param-gather, --tp-comm-overlap; "
       "blocking batched sends, non-blocking ones prefetching each input under interleaving)",
       {{"predict.attention", "cudnn"}, {"predict.pipeline_p2p", "serialized"}, {"predict.tp_comm", "overlapped"},
        {"predict.grad_reduce", "delayed"},
        {"predict.param_gather", "overlapped"}, {"predict.loss", "vocab_parallel"},
        {"predict.residual", "activations_dropout"}, {"predict.host", "eager"}, {"predict.bucket_pass", "nan_check_scale"},
        {"predict.embedding_grad", "dense_main_grad"}},
       {},
       {{"predict.pipeline_p2p", "prefetched"}}},
      {"deepspeed-2021",
       "DeepSpeed's pipeline engine of 2021, v0.5.0 (Megatron's attention and residual stream, gradients added in "
       "fp16/bf16 by autograd, activations partitioned over TP between stages, gradients sent whole, each send and "
       "receive a blocking call of its own)",
       {{"predict.attention", "batched_gemm"}, {"predict.pipeline_p2p", "serialized"}, {"predict.grad_reduce", "serialized"},
        {"predict.grad_accumulate", "lp_pass"}, {"predict.attention_dropout", "0.1"},
        {"predict.pipeline_messages", "partitioned_whole_grads"}, {"predict.pipeline_calls", "one_by_one"},
        {"predict.residual", "activations_dropout"}, {"predict.loss", "vocab_parallel"}, {"predict.host", "eager"},
        {"predict.embedding_grad", "dense"}}},
      {"deepspeed-2022",
       "DeepSpeed's pipeline engine with its BF16_Optimizer of 2022 (Megatron's attention and residual stream, bf16 "
       "gradients widened into fp32 ones after each micro-batch, activations and gradients partitioned over TP "
       "between stages, each send and receive a blocking call of its own)",
       {{"predict.attention", "batched_gemm"}, {"predict.pipeline_p2p", "serialized"}, {"predict.grad_reduce", "serialized"},
        {"predict.grad_accumulate", "fp32_pass"}, {"predict.attention_dropout", "0.1"},
        {"predict.pipeline_messages", "partitioned"}, {"predict.pipeline_calls", "one_by_one"},
        {"predict.residual", "activations_dropout"}, {"predict.loss", "vocab_parallel"}, {"predict.host", "eager"},
        {"predict.embedding_grad", "dense"}}},
      {"torchtitan",
       "torchtitan (FSDP2 reduce-scatters in the backward, copying each unit's gradients into its input, and copies each "
       "all-gather out into the parameters, SDPA "
       "flash attention, torch.distributed.pipelining's non-blocking sends, its Llama's RoPE, repeated heads and SwiGLU as "
       "eager operators)",
       {{"predict.attention", "flash"}, {"predict.gather_copy", "copy_out"}, {"predict.scatter_copy", "copy_in"},
        {"predict.pointwise", "eager"}, {"predict.residual", "activations"},
        {"predict.loss", "cross_entropy"}, {"predict.host", "eager"},
        {"predict.embedding_grad", "dense"}}},
      {"pytorch-eager",
       "eager PyTorch as ezpz runs it (SDPA flash attention, DDP/FSDP buckets during the backward, its Llama's "
       "RMSNorm, RoPE, repeated heads and SwiGLU as eager operators, F.cross_entropy over the widened logits gathered "
       "whole to every TP rank, the host's per-layer time where the profile has it)",
       {{"predict.attention", "flash"}, {"predict.rmsnorm", "eager"}, {"predict.pointwise", "eager"},
        {"predict.residual", "activations"}, {"predict.loss", "cross_entropy"}, {"predict.logits", "gathered"},
        {"predict.host", "eager"},
        {"predict.embedding_grad", "dense"}}},
      {"llm-foundry-2023",
       "llm-foundry's MPT on Composer as MosaicML's 2023 benchmarks ran it (FSDP1 FULL_SHARD with mixed_precision "
       "DEFAULT or PURE: bf16 parameters gathered, so the embedding's output and the residual stream are bf16; "
       "attn_impl: triton, FlashAttention's Triton kernel; flash-attn's fused cross-entropy; LayerNorm and GELU a "
       "kernel each; Composer's two training metrics, cross-entropy and perplexity, over each micro-batch's logits; the memory "
       "Composer's FSDP holds)",
       {{"predict.attention", "triton"}, {"predict.host", "eager"}, {"predict.embedding_grad", "dense"},
        {"predict.residual", "activations"}, {"predict.train_metrics", "composer_lm"}, {"predict.loss", "xentropy"},
        {"predict.memory", "composer_mpt"}}},
  };
  return systems;
}

std::vector<std::string> software_system_names() {
  std::vector<std::string> names;
  for (const auto& s : software_systems()) names.push_back(s.name);
  return names;
}

const SoftwareSystem& software_system(const std::string& name) {
  for (const auto& s : software_systems())
    if (name == s.name) return s;
  throw std::logic_error("kformer: no predict.system preset named " + name);  // the schema checked it
}

namespace {
const std::string kPresetOrigin = "predict.system=";  // a preset key's origin: this and the preset's name
}  // namespace

void apply_software_system(Config& cfg) {
  const std::string name = cfg.str("predict.system");
  const SoftwareSystem& s = software_system(name);
  for (const auto& [key, value] : s.keys)
    if (cfg.origin(key) == "default") cfg.set(key, value, kPresetOrigin + name);
  const auto over = [&](const std::vector<std::pair<const char*, const char*>>& keys, const std::string& why) {
    for (const auto& [key, value] : keys)  // over the preset's own value, not a given one
      if (cfg.origin(key) == "default" || !set_by_software_system(cfg, key).empty())
        cfg.set(key, value, kPresetOrigin + name + ", " + why);
  };
  if (cfg.str("parallel.schedule") == "interleaved") over(s.keys_interleaved, "interleaved");
  if (cfg.i64("parallel.pp") == 1 && cfg.str("train.precision") != "bf16") over(s.keys_with_pytorch_ddp, "PyTorch's DDP");
}

std::string set_by_software_system(const Config& cfg, const std::string& key) {
  const std::string& origin = cfg.origin(key);
  return origin.rfind(kPresetOrigin, 0) == 0 ? origin : std::string();
}

}  // namespace kformer
