// The model as a list of named global tensors, and how tensor parallelism cuts each one.
// Names are stable (`layers.3.attn.wq.weight`) and shapes global, so initialisation, checkpoints
// and tests see the same model whatever the layout; a rank holds the block its TP rank owns.
//
// Linear weights are (out, in) as kernels/gemm/gemm.hpp wants them. Column-parallel layers (wq, wk,
// wv, fc / gate, up, the head) split `out` (rows); row-parallel layers (wo, proj / down) split
// `in` (columns); the embedding table is vocab-parallel (rows). Everything else is replicated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "settings/run_settings.hpp"

namespace kformer {

struct ModelShape {
  bool gpt = true;  // gpt: LayerNorm, learned positions, GELU, tied head; else llama
  int n_layers = 0, d_model = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn_dim = 0;
  int vocab = 0;         // real vocabulary
  int vocab_padded = 0;  // multiple of 64 * tp: the padding rows are zero and masked in the loss
  int max_seq_len = 0;
  int tp = 1;
  bool sequence_parallel = false;  // parallel.sequence_parallel (with tp > 1)
};
// The model of `m` cut for `tp` tensor-parallel ranks.
ModelShape model_shape(const ModelSettings& m, int tp, bool sequence_parallel);
ModelShape model_shape(const RunSettings& s);  // at the run's tp

enum class Split { none, rows, cols };
enum class Init { normal, ones, zeros };

struct ParamSpec {
  std::string name;
  std::int64_t rows = 0, cols = 1;  // global shape; a vector is (n, 1)
  std::int64_t real_rows = 0;       // rows that exist in the model (< rows for the padded vocab)
  Split split = Split::none;
  Init init = Init::zeros;
  float std_dev = 0;
  bool decay = false;  // weight decay applies (matrices), not to norms and biases
  int layer = -1;      // -1 embedding, 0..L-1 blocks, L final norm and head (pipeline staging)

  std::int64_t local_rows(int tp) const { return split == Split::rows ? rows / tp : rows; }
  std::int64_t local_cols(int tp) const { return split == Split::cols ? cols / tp : cols; }
  std::int64_t local_size(int tp) const { return local_rows(tp) * local_cols(tp); }
  std::int64_t row0(int tp, int tp_rank) const { return split == Split::rows ? local_rows(tp) * tp_rank : 0; }
  std::int64_t col0(int tp, int tp_rank) const { return split == Split::cols ? local_cols(tp) * tp_rank : 0; }
};

// Every parameter in a fixed order. Tensors a kernel reads as one packed block are adjacent:
// wq, wk, wv (and their biases) form a rank's QKV projection; gate and up its SwiGLU input.
std::vector<ParamSpec> model_params(const ModelShape& s);

// The model cut into pp * v chunks: (first layer, layer count) of each, from
// parallel.stage_layers or as even as possible.
std::vector<std::pair<int, int>> chunk_layers(const RunSettings& s);

// The parameters a pipeline rank holds: the blocks of its chunks (rank r: chunks r, r+pp, ...),
// the embedding with chunk 0, the final norm and head with the last chunk, and, for gpt, a copy
// of the embedding unit on the last chunk's rank (the tied head).
std::vector<ParamSpec> rank_params(const ModelShape& s, const std::vector<std::pair<int, int>>& chunks, int pp,
                                   int pp_rank);

// Parameters in the model (real rows only; the vocabulary padding is not counted).
std::int64_t count_params(const std::vector<ParamSpec>& specs);

}  // namespace kformer
