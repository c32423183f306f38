// The closed sets of the deck (model.family, train.precision, train.recompute, parallel.schedule,
// kernels.gemm, kernels.attention (and the kinds it resolves to), predict.attention,
// predict.pipeline_p2p, predict.grad_reduce, predict.grad_accumulate, predict.bucket_pass, predict.embedding_grad,
// predict.tp_precision,
// predict.gather_copy, predict.pipeline_messages, predict.pipeline_calls, predict.residual, ...) as enums, with their
// names: the one table of each set's names. The schema's choices are made from it (schema.cpp:
// names_of<E>()), so a choice exists in the deck exactly when its enum value does.
#pragma once

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/kernel_choice.hpp"

namespace kformer {

enum class Family { gpt, llama };
enum class Precision { fp32, bf16 };  // train.precision and parallel.grad_reduce_dtype
// Activation recomputation (train.recompute): see recompute.hpp for what each keeps.
enum class Recompute { none, selective, full, op };
enum class ScheduleKind { one_f_one_b, gpipe, interleaved, zb_h1 };
enum class GemmSetting { automatic, native, vendor };  // kernels.gemm before start-up resolves auto
// kernels.attention before start-up resolves auto: the kernels::AttentionKind values after `automatic`, in order.
enum class AttentionSetting { automatic, naive, fused, batched_gemm, vendor };
// predict.attention: whose attention kernels a prediction costs (kernel_costs.hpp).
enum class AttentionModel { kformer, batched_gemm, flash, cudnn, triton };
// The TP, gather and send keys: whether the communication runs beside the computation or the
// computation waits for it.
enum class Overlap { overlapped, serialized };
// predict.pipeline_p2p: as Overlap, and prefetched (Megatron-Core's overlap_p2p_comm under
// interleaving): each send and receive a non-blocking call of its own, an action's input received
// from the end of the rank's previous action of its phase (pipeline_sim.hpp).
enum class PipelineP2p { overlapped, serialized, prefetched };
// predict.grad_reduce: when the data-parallel buckets are reduced: each as the last backward frees
// it, after the last backward, or (Megatron-Core's delay_grad_reduce) the first pipeline stage's as
// its last backward frees them and every other stage's after its pipeline (step_sim.hpp).
enum class GradReduce { overlapped, serialized, delayed };
// predict.grad_accumulate: how a micro-batch's weight gradients join the iteration's (chunk_work.hpp).
enum class GradAccumulation { fused, fp32_pass, lp_pass };
// predict.bucket_pass: what the costed software's data-parallel wrapper does to each fp32 gradient
// bucket before its reduction, once an iteration (chunk_work.hpp): nothing (kformer's 1/N is in the
// loss gradient), a division by DP (Megatron-LM's own DDP of 2022), or a NaN check by the bucket's
// norm and then that scaling (Megatron-Core r0.8's start_grad_sync).
enum class BucketPass { none, scale, nan_check_scale };
// predict.embedding_grad: how the token embedding's gradient is made each micro-batch
// (chunk_work.hpp): kformer's scatter of the batch's rows into it, or PyTorch's
// embedding_dense_backward (a zeroed dense gradient of the whole table), then (Megatron) added into
// the fp32 main_grad by its gradient hook.
enum class EmbeddingGrad { sparse, dense, dense_main_grad };
// predict.host: who issues the kernels and whether the host waits for each (chunk_work.hpp).
enum class HostCost { kformer, eager, blocking };
// predict.tp_precision: the type a TP collective of activations moves in a bf16 run (chunk_work.hpp).
enum class TpPrecision { fp32, activations };
// predict.gather_copy: what follows a ZeRO-3 unit's all-gather on the compute stream (chunk_work.hpp).
enum class GatherCopy { none, copy_out };
// predict.scatter_copy: what precedes a ZeRO-3 unit's gradient reduce-scatter (chunk_work.hpp).
enum class ScatterCopy { none, copy_in };
// predict.pipeline_messages: how a pipeline message split over TP is handled around the backward
// (chunk_work.hpp): kformer's and Megatron-LM's split, or DeepSpeed's PartitionedTensor (its stage
// output gathered back before the backward), the gradients split too or sent whole.
enum class PipelineMessages { split, partitioned, partitioned_whole_grads };
// predict.pipeline_calls: a pipeline rank's sends and receive between two actions as one group
// (kformer's, Megatron-LM's batched exchange) or as blocking calls one after another, in
// DeepSpeed's TrainSchedule order (software_programs.hpp, one_call_a_step).
enum class PipelineCalls { grouped, one_by_one };
// predict.residual: the residual stream's type in a bf16 run as the costed software keeps it:
// kformer's fp32, the activations' bf16, or that with Megatron-LM's fused bias-dropout-add
// (hidden dropout 0.1) on each branch (kernel_costs.hpp, residual_stream_us).
enum class ResidualStream { fp32, activations, activations_dropout };
// predict.rmsnorm, predict.pointwise: how the costed software runs an RMSNorm, or RoPE, GQA's
// repeated heads and SwiGLU: one kernel each way, or eager PyTorch's operators one by one
// (kernel_costs.hpp).
enum class Fusion { fused, eager };
// predict.loss: how the costed software runs the loss over the logits: kformer's fused passes,
// Megatron-LM's vocab-parallel cross-entropy, PyTorch's F.cross_entropy, or flash-attn's fused
// cross-entropy kernels (kernel_costs.hpp).
enum class LossKernels { fused, vocab_parallel, cross_entropy, xentropy };
// predict.logits: where the loss runs under TP: on each rank's share of the vocabulary (kformer's,
// Megatron-LM's vocab-parallel loss, torchtitan's loss_parallel), or on the whole logits gathered to
// every TP rank (ezpz's plan: the output layer ColwiseParallel with output_layouts=Replicate()).
enum class LogitsLayout { sharded, gathered };
// predict.train_metrics: what the costed software computes from each micro-batch's logits besides the
// loss: nothing (kformer's), or Composer's language-model training metrics (kernel_costs.hpp).
enum class TrainMetrics { none, composer_lm };
// predict.memory: whose memory predict's peak per rank is: kformer's own step's (its estimate), what
// Composer's FSDP holds for llm-foundry's MPT, or what Megatron-LM of 2022 holds (Korthikanti et al.'s
// count; predict/software_memory.hpp).
enum class MemoryModel { kformer, composer_mpt, megatron_lm };
using kernels::AttentionKind;

// The deck's names, indexed by the enum's value.
template <class E>
struct Names;
template <>
struct Names<Family> {
  static constexpr std::array<const char*, 2> list{"gpt", "llama"};
};
template <>
struct Names<Precision> {
  static constexpr std::array<const char*, 2> list{"fp32", "bf16"};
};
template <>
struct Names<Recompute> {
  static constexpr std::array<const char*, 4> list{"none", "selective", "full", "op"};
};
template <>
struct Names<ScheduleKind> {
  static constexpr std::array<const char*, 4> list{"1f1b", "gpipe", "interleaved", "zb-h1"};
};
template <>
struct Names<GemmSetting> {
  static constexpr std::array<const char*, 3> list{"auto", "native", "vendor"};
};
template <>
struct Names<AttentionModel> {
  static constexpr std::array<const char*, 5> list{"kformer", "batched_gemm", "flash", "cudnn", "triton"};
};
template <>
struct Names<Overlap> {
  static constexpr std::array<const char*, 2> list{"overlapped", "serialized"};
};
template <>
struct Names<PipelineP2p> {
  static constexpr std::array<const char*, 3> list{"overlapped", "serialized", "prefetched"};
};
template <>
struct Names<GradReduce> {
  static constexpr std::array<const char*, 3> list{"overlapped", "serialized", "delayed"};
};
template <>
struct Names<GradAccumulation> {
  static constexpr std::array<const char*, 3> list{"fused", "fp32_pass", "lp_pass"};
};
template <>
struct Names<BucketPass> {
  static constexpr std::array<const char*, 3> list{"none", "scale", "nan_check_scale"};
};
template <>
struct Names<EmbeddingGrad> {
  static constexpr std::array<const char*, 3> list{"sparse", "dense", "dense_main_grad"};
};
template <>
struct Names<HostCost> {
  static constexpr std::array<const char*, 3> list{"kformer", "eager", "blocking"};
};
template <>
struct Names<TpPrecision> {
  static constexpr std::array<const char*, 2> list{"fp32", "activations"};
};
template <>
struct Names<GatherCopy> {
  static constexpr std::array<const char*, 2> list{"none", "copy_out"};
};
template <>
struct Names<ScatterCopy> {
  static constexpr std::array<const char*, 2> list{"none", "copy_in"};
};
template <>
struct Names<PipelineMessages> {
  static constexpr std::array<const char*, 3> list{"split", "partitioned", "partitioned_whole_grads"};
};
template <>
struct Names<PipelineCalls> {
  static constexpr std::array<const char*, 2> list{"grouped", "one_by_one"};
};
template <>
struct Names<ResidualStream> {
  static constexpr std::array<const char*, 3> list{"fp32", "activations", "activations_dropout"};
};
template <>
struct Names<Fusion> {
  static constexpr std::array<const char*, 2> list{"fused", "eager"};
};
template <>
struct Names<LogitsLayout> {
  static constexpr std::array<const char*, 2> list{"sharded", "gathered"};
};
template <>
struct Names<TrainMetrics> {
  static constexpr std::array<const char*, 2> list{"none", "composer_lm"};
};
template <>
struct Names<MemoryModel> {
  static constexpr std::array<const char*, 3> list{"kformer", "composer_mpt", "megatron_lm"};
};
template <>
struct Names<LossKernels> {
  static constexpr std::array<const char*, 4> list{"fused", "vocab_parallel", "cross_entropy", "xentropy"};
};
template <>
struct Names<AttentionKind> {
  static constexpr std::array<const char*, kernels::kAttentionKinds> list{"naive", "fused", "batched_gemm", "vendor"};
};
template <>
struct Names<AttentionSetting> {
  static constexpr std::array<const char*, kernels::kAttentionKinds + 1> list{"auto", "naive", "fused", "batched_gemm",
                                                                              "vendor"};
};

// The kind a fixed kernels.attention names (not `automatic`, which start-up resolves).
inline AttentionKind fixed_attention(AttentionSetting s) {
  if (s == AttentionSetting::automatic) throw std::logic_error("kernels.attention=auto is resolved at start-up");
  return static_cast<AttentionKind>(static_cast<int>(s) - 1);
}
// The setting that names `k` (fixed_attention's inverse).
inline AttentionSetting setting_of(AttentionKind k) { return static_cast<AttentionSetting>(static_cast<int>(k) + 1); }

// Every name of the set, in the enum's order: a key's choices in the schema.
template <class E>
std::vector<std::string> names_of() {
  return std::vector<std::string>(Names<E>::list.begin(), Names<E>::list.end());
}

template <class E>
const char* name_of(E e) {
  return Names<E>::list.at(static_cast<std::size_t>(e));
}

// The enum value named `name`; throws std::invalid_argument listing the valid names.
template <class E>
E parse_choice(const std::string& name) {
  std::string valid;
  for (std::size_t i = 0; i < Names<E>::list.size(); ++i) {
    if (name == Names<E>::list[i]) return static_cast<E>(i);
    valid += (i ? ", " : "") + std::string(Names<E>::list[i]);
  }
  throw std::invalid_argument("'" + name + "' is not one of " + valid);
}

}  // namespace kformer
