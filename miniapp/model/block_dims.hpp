// The sizes one transformer block works on, on one rank: a micro-batch of B sequences of T tokens
// through the rank's tensor-parallel slice of the block (no Kokkos: the estimate and predict use it).
#pragma once

#include "model/model_spec.hpp"

namespace kformer {

struct BlockDims {
  int B = 0, T = 0, C = 0, Hl = 0, KVl = 0, hd = 0, Fl = 0;
  bool gpt = true;
  int sp = 1;  // sequence parallelism: the TP degree over which the norms' and residuals' rows are split
  int tp = 1;
  int N() const { return B * T; }
  int rows() const { return N() / sp; }  // the rows of x_in, x_mid, x_out, ln1, ln2 on this rank
  // Pipeline messages split over TP (Megatron-LM's scatter-gather): without sequence parallelism
  // every TP rank holds the whole (N,C) activation, so each sends only its 1/tp of the rows and
  // the receiving TP group all-gathers them (where tp divides N). Under sequence parallelism a
  // rank's R rows are its own already.
  bool splits_messages() const { return sp == 1 && tp > 1 && N() % tp == 0; }
  int message_rows() const { return splits_messages() ? N() / tp : rows(); }
  int qkv_width() const { return (Hl + 2 * KVl) * hd; }
  int q_width() const { return Hl * hd; }
  int mlp_in_width() const { return gpt ? Fl : 2 * Fl; }  // llama: [gate | up]
};
BlockDims block_dims(const ModelShape& s, int micro_batch, int seq_len);

}  // namespace kformer
