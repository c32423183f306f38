// The model's parameters (see model_spec.hpp).
#include "model/model_spec.hpp"

#include "model/block_tensors.hpp"

#include <cmath>

namespace kformer {

ModelShape model_shape(const ModelSettings& m, int tp, bool sequence_parallel) {
  ModelShape s;
  s.gpt = m.family == Family::gpt;
  s.n_layers = m.n_layers;
  s.d_model = m.d_model;
  s.n_heads = m.n_heads;
  s.n_kv_heads = m.n_kv_heads;
  s.head_dim = s.d_model / s.n_heads;
  s.ffn_dim = m.ffn_dim;
  s.vocab = m.vocab_size;
  s.tp = tp;
  s.sequence_parallel = sequence_parallel && s.tp > 1;
  const int pad = 64 * s.tp;
  s.vocab_padded = (s.vocab + pad - 1) / pad * pad;
  s.max_seq_len = m.max_seq_len;
  return s;
}

ModelShape model_shape(const RunSettings& s) {
  return model_shape(s.model, s.parallel.tp, s.parallel.sequence_parallel);
}

std::vector<ParamSpec> model_params(const ModelShape& s) {
  const std::int64_t C = s.d_model, Q = std::int64_t(s.n_heads) * s.head_dim,
                     KV = std::int64_t(s.n_kv_heads) * s.head_dim, F = s.ffn_dim;
  const float std0 = 0.02f, std_out = 0.02f / std::sqrt(2.0f * s.n_layers);  // GPT-2's scaled residual init
  std::vector<ParamSpec> p;
  auto add = [&](std::string name, std::int64_t rows, std::int64_t cols, Split split, Init init, float sd,
                 bool decay, int layer) {
    p.push_back({std::move(name), rows, cols, rows, split, init, sd, decay, layer});
  };
  add("embed.tokens.weight", s.vocab_padded, C, Split::rows, Init::normal, std0, true, -1);
  p.back().real_rows = s.vocab;
  if (s.gpt) add("embed.positions.weight", s.max_seq_len, C, Split::none, Init::normal, 0.01f, true, -1);

  for (int l = 0; l < s.n_layers; ++l) {
    const std::string b = "layers." + std::to_string(l) + ".";
    if (s.gpt) {
      add(b + leaf(BlockTensor::ln1_w), C, 1, Split::none, Init::ones, 0, false, l);
      add(b + leaf(BlockTensor::ln1_b), C, 1, Split::none, Init::zeros, 0, false, l);
    } else {
      add(b + leaf(BlockTensor::attn_norm), C, 1, Split::none, Init::ones, 0, false, l);
    }
    add(b + leaf(BlockTensor::wq), Q, C, Split::rows, Init::normal, std0, true, l);
    add(b + leaf(BlockTensor::wk), KV, C, Split::rows, Init::normal, std0, true, l);
    add(b + leaf(BlockTensor::wv), KV, C, Split::rows, Init::normal, std0, true, l);
    if (s.gpt) {
      add(b + leaf(BlockTensor::wq_b), Q, 1, Split::rows, Init::zeros, 0, false, l);
      add(b + leaf(BlockTensor::wk_b), KV, 1, Split::rows, Init::zeros, 0, false, l);
      add(b + leaf(BlockTensor::wv_b), KV, 1, Split::rows, Init::zeros, 0, false, l);
    }
    add(b + leaf(BlockTensor::wo), C, Q, Split::cols, Init::normal, std_out, true, l);
    if (s.gpt) {
      add(b + leaf(BlockTensor::wo_b), C, 1, Split::none, Init::zeros, 0, false, l);
      add(b + leaf(BlockTensor::ln2_w), C, 1, Split::none, Init::ones, 0, false, l);
      add(b + leaf(BlockTensor::ln2_b), C, 1, Split::none, Init::zeros, 0, false, l);
      add(b + leaf(BlockTensor::fc), F, C, Split::rows, Init::normal, std0, true, l);
      add(b + leaf(BlockTensor::fc_b), F, 1, Split::rows, Init::zeros, 0, false, l);
      add(b + leaf(BlockTensor::proj), C, F, Split::cols, Init::normal, std_out, true, l);
      add(b + leaf(BlockTensor::proj_b), C, 1, Split::none, Init::zeros, 0, false, l);
    } else {
      add(b + leaf(BlockTensor::mlp_norm), C, 1, Split::none, Init::ones, 0, false, l);
      add(b + leaf(BlockTensor::gate), F, C, Split::rows, Init::normal, std0, true, l);
      add(b + leaf(BlockTensor::up), F, C, Split::rows, Init::normal, std0, true, l);
      add(b + leaf(BlockTensor::down), C, F, Split::cols, Init::normal, std_out, true, l);
    }
  }
  const int L = s.n_layers;
  add("final_norm.weight", C, 1, Split::none, Init::ones, 0, false, L);
  if (s.gpt) {
    add("final_norm.bias", C, 1, Split::none, Init::zeros, 0, false, L);
  } else {
    add("head.weight", s.vocab_padded, C, Split::rows, Init::normal, std0, true, L);
    p.back().real_rows = s.vocab;
  }
  return p;
}

std::vector<std::pair<int, int>> chunk_layers(const RunSettings& s) {
  const int L = s.model.n_layers, S = s.parallel.pp * s.parallel.virtual_stages;
  const auto& given = s.parallel.stage_layers;
  std::vector<std::pair<int, int>> out;
  int first = 0;
  for (int c = 0; c < S; ++c) {
    const int n = given.empty() ? L / S + (c < L % S) : given[c];
    out.emplace_back(first, n);
    first += n;
  }
  return out;
}

std::vector<ParamSpec> rank_params(const ModelShape& s, const std::vector<std::pair<int, int>>& chunks, int pp,
                                   int pp_rank) {
  const int S = static_cast<int>(chunks.size());
  auto held_layer = [&](int layer) {
    for (int c = pp_rank; c < S; c += pp)
      if (layer >= chunks[c].first && layer < chunks[c].first + chunks[c].second) return true;
    return false;
  };
  const bool first = pp_rank == 0, last = (S - 1) % pp == pp_rank;
  std::vector<ParamSpec> out;
  for (const auto& p : model_params(s))
    if ((p.layer < 0 && (first || (last && s.gpt))) || (p.layer == s.n_layers && last) ||
        (p.layer >= 0 && p.layer < s.n_layers && held_layer(p.layer)))
      out.push_back(p);
  return out;
}

std::int64_t count_params(const std::vector<ParamSpec>& specs) {
  std::int64_t n = 0;
  for (const auto& p : specs) n += p.real_rows * p.cols;
  return n;
}

}  // namespace kformer
