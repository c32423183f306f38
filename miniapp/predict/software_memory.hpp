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

}  // namespace kformer::predict
