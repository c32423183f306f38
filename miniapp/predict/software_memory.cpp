// The memory the costed software holds (software_memory.hpp has the counts and where each comes from).
#include "predict/software_memory.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

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

SoftwareMemory megatron_lm_memory(const RunSettings& s, const ModelShape& shape) {
  const bool bf16 = s.bf16();
  const double e = bf16 ? 2 : 4;
  const int tp = s.parallel.tp, pp = s.parallel.pp, dp = s.parallel.dp;
  const int v = s.parallel.schedule == ScheduleKind::interleaved ? s.parallel.virtual_stages : 1;
  const double m = s.parallel.microbatches, N = double(s.train.micro_batch) * s.train.seq_len;
  const double h = shape.d_model, F = shape.ffn_dim, a = shape.n_heads, T = s.train.seq_len, V = shape.vocab_padded;
  const double kv = double(shape.n_kv_heads) * shape.head_dim;
  const bool sp = shape.sequence_parallel;
  // A token of a layer (Korthikanti et al.'s 34 h + 5 a s in 16 bits, F = 4h).
  const double uncut = (4 * e + 2) * h, cut = e * (h + 2 * kv) + e * h + 2 * e * F;
  const double scores = s.predict.attention == AttentionModel::batched_gemm
                            ? (s.predict.attention_dropout > 0 ? 2 * e + 1 : e) * a * T / tp
                            : 0;
  const double whole = (sp ? (uncut + cut) / tp : uncut + cut / tp) + scores;
  const double layer = s.train.recompute == Recompute::full        ? e * h / (sp ? tp : 1)
                       : s.train.recompute == Recompute::selective ? whole - scores
                                                                   : whole;
  const double per_param = bf16 ? (s.parallel.zero >= 1 ? 2 + 4 + 12.0 / dp : 18)
                                : (s.parallel.zero >= 1 ? 4 + 4 + 8.0 / dp : 16);
  const auto chunks = chunk_layers(s);
  const int S = static_cast<int>(chunks.size());

  SoftwareMemory mem;
  mem.model = "megatron_lm";
  mem.saved_per_token = layer;
  mem.logits = (4 + e) * V / tp * N;
  for (int r = 0; r < pp; ++r) {
    double params = 0, layers = 0;
    for (const ParamSpec& p : rank_params(shape, chunks, pp, r)) params += double(p.local_size(tp));
    for (int c = r; c < S; c += pp) layers += chunks[c].second;
    // Chunk-micro-batches in flight at the end of the warm-up, each of layers / v layers.
    const double units = v == 1 ? std::min<double>(pp - r, m)
                                : (m == pp ? m * v : std::min<double>((pp - r - 1) * 2 + (v - 1) * pp + 1, m * v));
    double bytes = per_param * params + units * layers / v * layer * N;
    if (r == 0) bytes += units / v * h / (sp ? tp : 1) * N;  // the embedding's dropout mask
    if ((S - 1) % pp == r) bytes += e * h / (sp ? tp : 1) * N + mem.logits;  // final LayerNorm's input, the loss
    if (s.train.recompute == Recompute::full) bytes += whole * N;  // the layer re-run for its backward
    if (r == 0) mem.states = per_param * params;
    mem.moments.push_back({"stage " + std::to_string(r), bytes});
  }
  return mem;
}

SoftwareMemory software_memory(const RunSettings& s, const ModelShape& shape) {
  switch (s.predict.memory) {
    case MemoryModel::composer_mpt: return composer_mpt_memory(s, shape);
    case MemoryModel::megatron_lm: return megatron_lm_memory(s, shape);
    case MemoryModel::kformer: break;
  }
  throw std::logic_error("software_memory: predict.memory=kformer counts kformer's own step (estimate_memory)");
}

}  // namespace kformer::predict
