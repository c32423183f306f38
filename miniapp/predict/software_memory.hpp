// What a rank's GPU holds when the costed software runs the layout, where that differs from
// kformer's own step (predict.memory; kformer's is plan/memory.hpp's estimate).
//
// composer_mpt: llm-foundry's MPT under Composer 0.16's FSDP1 (the llm-foundry-2023 preset), per rank
// of the FSDP group (n = parallel.dp), e bytes an activation (2 in bf16, 4 in fp32), N tokens a
// micro-batch (micro_batch * seq_len), d channels, F the FFN's, h heads, V the vocabulary:
//   states     16 bytes a parameter over n: the fp32 flat parameters FSDP shards, their fp32
//              gradients (reduced, cast to the parameter's type, kept over the micro-batches) and
//              DecoupledAdamW's exp_avg and exp_avg_sq.
//   gathered   e bytes a parameter of each unit gathered: the root unit (token and position
//              embeddings, which the head shares, and the final norm) from its forward to the end of
//              the backward, FSDP1 not freeing the root after the forward; under FULL_SHARD
//              (parallel.zero=3) two blocks, limit_all_gathers' bound; under SHARD_GRAD_OP
//              (parallel.zero=2) every block from its forward to its backward.
//   saved      what each block keeps for its backward, a token: without checkpointing, MPTBlock's
//              tensors (x and norm_1's output, Wqkv's output, which the flash kernel's q, k, v view,
//              its output, x after the residual add and norm_2's output, up_proj's output and GELU's:
//              e (6d + 2 kv + 2F) bytes), LayerNorm's fp32 mean and rstd (16) and the flash kernel's fp32
//              log-sum-exp (4h); with activation_checkpointing, the block's input alone (e d), and the
//              block whose backward runs holds the rest again.
//   logits     e V a token: MPT's logits, which Composer keeps in state.outputs from the forward until
//              its training metrics have read them after the backward; flash-attn's cross-entropy
//              writes their gradient, e V more, in the head's backward.
//   metrics    after the backward, LanguageCrossEntropy and LanguagePerplexity each run
//              CrossEntropyLoss under autocast: the logits widened to fp32 and log_softmax's fp32
//              output at once (8 V a token; 4 V without autocast, in fp32).
// The peak is the largest of three moments: the head's backward (every block's saved tensors, the
// logits and their gradient), the last block's backward (its tensors again under checkpointing, the
// unsharded gradient of its parameters, in fp32 too where parallel.grad_reduce_dtype=fp32 widens it
// for the reduce-scatter, and the gradients inside its FFN, e (2F + d) a token), and the metrics.
// Not counted: the caching allocator's fragmentation, the optimizer's temporaries, NCCL's buffers
// (the profile's process_baseline_gb stands for the CUDA context).
//
// megatron_lm: Megatron-LM of 2022 (the megatron-lm-2022 preset), per rank of each pipeline stage, with
// Korthikanti et al.'s count of what a GPT layer keeps ("Reducing Activation Recomputation in Large
// Transformer Models", 2022, section 4: sbh (34 + 5as/h) bytes a layer and micro-batch in 16 bits, s
// tokens of b sequences, h channels, a heads, t TP ranks), written for any FFN width F and e-byte
// activations so that the paper's 34 is e = 2, F = 4h:
//   states     18 bytes a parameter of the rank in bf16: the bf16 parameter, its fp32 main_grad
//              (Megatron accumulates bf16 runs' gradients in fp32) and the optimizer's fp32 master
//              copy and Adam moments; 2 + 4 + 12/dp with the distributed optimizer (parallel.zero=1);
//              in fp32 4 + 4 + 8 (8/dp). The stage's blocks and, on the first and last stage, the word
//              embeddings (the last keeps its copy for the tied head), cut by TP.
//   a layer    without recomputation, a token keeps (4e + 2) h bytes TP does not cut (the LayerNorms'
//              and the two GEMM regions' inputs, two 1-byte dropout masks) and e (h + 2kv) + e h + 2e F
//              it does (Q, K, V, the projection's input, GELU's input and output); sequence
//              parallelism cuts all of it; the fused softmax's output, its dropout mask and the
//              dropped-out probabilities add (2e + 1) a s bytes a token over t (e a s without attention
//              dropout, nothing for a flash kernel or under selective recomputation); full
//              recomputation keeps the layer's input, e h (over t with sequence parallelism), and the
//              layer whose backward runs holds the rest again.
//   in flight  the micro-batches a stage holds, as Megatron's schedules warm up: min(p - r, m) under
//              1F1B on stage r of p; interleaved, (p - r - 1) 2 + (v - 1) p + 1 chunk-micro-batches
//              (all m v when m = p).
//   extras     the first stage's embedding dropout mask (h bytes a token in flight); the last stage's
//              final LayerNorm input and the loss: Megatron widens the logits to fp32 for its
//              vocab-parallel cross-entropy, which keeps them as the softmax (4 V/t a token) beside
//              the e V/t ones being widened.
// The peak is the largest stage's. Not counted: the pipeline's message buffers, the allocator's
// fragmentation, NCCL's buffers.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_spec.hpp"
#include "settings/run_settings.hpp"

namespace kformer::predict {

struct MemoryMoment {
  std::string name;
  double bytes = 0;
};

struct SoftwareMemory {
  std::string model;  // predict.memory's value
  double states = 0, root_unit = 0, block_unit = 0, saved_per_token = 0, logits = 0;  // bytes per rank
  std::vector<MemoryMoment> moments;
  const MemoryMoment& peak() const;  // the largest moment
  nlohmann::json to_json() const;
};

// The layout's memory as predict.memory=composer_mpt counts it (settings/validate.cpp has refused the
// layouts it does not describe).
SoftwareMemory composer_mpt_memory(const RunSettings& s, const ModelShape& shape);
// As predict.memory=megatron_lm counts it; one moment a pipeline stage ("stage 0", ...).
SoftwareMemory megatron_lm_memory(const RunSettings& s, const ModelShape& shape);
// The one predict.memory names; kformer has none (plan/memory.hpp's estimate is its count).
SoftwareMemory software_memory(const RunSettings& s, const ModelShape& shape);

}  // namespace kformer::predict
