// A block's sizes on one rank (see block_dims.hpp).
#include "model/block_dims.hpp"

namespace kformer {

BlockDims block_dims(const ModelShape& s, int micro_batch, int seq_len) {
  BlockDims d;
  d.B = micro_batch;
  d.T = seq_len;
  d.C = s.d_model;
  d.Hl = s.n_heads / s.tp;
  d.KVl = s.n_kv_heads / s.tp;
  d.hd = s.head_dim;
  d.Fl = s.ffn_dim / s.tp;
  d.gpt = s.gpt;
  d.sp = s.sequence_parallel ? s.tp : 1;
  d.tp = s.tp;
  return d;
}

}  // namespace kformer
