// The memory the costed software holds (software_memory.hpp has the counts and where each comes from).
#include "predict/software_memory.hpp"

#include <algorithm>

namespace kformer::predict {

const MemoryMoment& SoftwareMemory::peak() const {
  return *std::max_element(moments.begin(), moments.end(),
                           [](const MemoryMoment& a, const MemoryMoment& b) { return a.bytes < b.bytes; });
}

nlohmann::json SoftwareMemory::to_json() const {
  nlohmann::json m = nlohmann::json::object();
  for (const auto& x : moments) m[x.name] = x.bytes;
  return {{"model", model},
          {"peak_bytes", peak().bytes},
          {"peak_moment", peak().name},
          {"moments_bytes", m},
          {"states_bytes", states},
          {"root_unit_bytes", root_unit},
          {"block_unit_bytes", block_unit},
          {"saved_bytes_per_token", saved_per_token},
          {"logits_bytes", logits}};
}

SoftwareMemory composer_mpt_memory(const RunSettings& s, const ModelShape& shape) {
  const bool bf16 = s.bf16();
  const double e = bf16 ? 2 : 4;  // an activation, a gathered parameter, a gradient in the parameters' type
  const double N = double(s.train.micro_batch) * s.train.seq_len;
  const double d = shape.d_model, F = shape.ffn_dim, h = shape.n_heads, V = shape.vocab_padded;
  const double kv = double(shape.n_kv_heads) * shape.head_dim;
  const int L = shape.n_layers;
  double root_params = 0, block_params = 0;
  for (const ParamSpec& p : model_params(shape)) {
    const double n = double(p.real_rows) * p.cols;
    if (p.layer < 0 || p.layer == L) root_params += n;
    if (p.layer == 0) block_params += n;
  }
  const double params = root_params + L * block_params;
  const bool shard_grad_op = s.parallel.zero == 2 && s.parallel.dp > 1;
  const bool checkpointed = s.train.recompute == Recompute::full;

  SoftwareMemory m;
  m.model = "composer_mpt";
  m.states = 16 * params / s.parallel.dp;
  m.root_unit = e * root_params;
  m.block_unit = e * block_params;
  const double block_tensors = e * (6 * d + 2 * kv + 2 * F) + 16 + 4 * h;  // a token, one block
  m.saved_per_token = L * (checkpointed ? e * d : block_tensors);
  m.logits = e * V * N;
  const double blocks_held = (shard_grad_op ? L : 2) * m.block_unit;
  const double held = m.states + m.root_unit + blocks_held + m.saved_per_token * N;
  const double final_norm = 2 * e * d * N;  // its input, and its output the head reads
  const double block_grad = (e + (bf16 && s.parallel.grad_reduce_dtype == Precision::fp32 ? 4 : 0)) * block_params;
  m.moments = {
      {"head_backward", held + final_norm + 2 * m.logits + m.root_unit},
      {"last_block_backward",
       held + m.root_unit + (checkpointed ? block_tensors * N : 0) + m.logits + block_grad + e * (2 * F + d) * N},
      {"train_metrics", m.states + m.logits + (bf16 ? 8 : 4) * V * N},
  };
  return m;
}

}  // namespace kformer::predict
