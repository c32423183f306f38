// Model FLOPs, counted per operation from the shapes the kernels run on a rank (a GEMM of
// (M,K)x(K,N) is 2MNK; causal attention is half of the square: QK^T and AV each B*H*T*T*hd),
// backward counted as twice the forward. The closed form 6*N_params + 6*L*T*C per token (the
// attention term halved for causality) cross-checks the count in the tests.
#pragma once

#include "model/block.hpp"
#include "model/model_spec.hpp"
#include "model/recompute.hpp"

namespace kformer {

struct Flops {
  double forward = 0, backward = 0;
  double recompute = 0;  // forward work re-run for the backward (train.recompute): hardware, not model, FLOPs
  double total() const { return forward + backward; }  // model FLOPs (what MFU divides)
  double hardware() const { return total() + recompute; }
  Flops& operator+=(const Flops& o) {
    forward += o.forward;
    backward += o.backward;
    recompute += o.recompute;
    return *this;
  }
};

// One block's micro-batch on one TP rank.
Flops block_flops(const BlockDims& d);
// What one block's recomputation re-runs per micro-batch: its whole forward (full), the naive
// attention's QK^T and AV (selective; 0 with the fused attention, whose backward recomputes the
// scores under every mode, as the model FLOPs of flash attention leave out), its K, output and up
// projections (op).
double recompute_flops(const BlockDims& d, Recompute mode, kernels::AttentionKind attention);
// The LM head (N tokens, the rank's vocab_padded/tp rows).
Flops head_flops(std::int64_t tokens, int d_model, int vocab_rows);

// Per token of the whole model (all TP ranks together), closed form: 6 * (matmul parameters,
// the head included, embeddings excluded) + 6 * n_layers * seq_len * d_model.
double closed_form_flops_per_token(const ModelShape& s, int seq_len);

// The field's convention (Megatron-LM's and PaLM's MFU): per token of the whole model, 6 *
// (matmul parameters, head included, embeddings excluded) + 12 * n_layers * seq_len * (n_heads *
// head_dim), attention's QK^T and AV counted whole rather than their causal half. The report's
// model TFLOP/s per rank is this over the iteration's tokens, divided by the world's ranks.
double model_flops_per_token(const ModelShape& s, int seq_len);
// In the same convention, what train.recompute re-runs per token (hardware FLOPs beside the
// model's): the forward of the `full_layers` blocks full recomputation re-runs (all of them, or
// train.recompute_layers of each chunk), naive attention's QK^T and AV (selective), every block's
// K, output and up projections (op).
double recompute_flops_per_token(const ModelShape& s, int seq_len, Recompute mode, kernels::AttentionKind attention,
                                 int full_layers);

}  // namespace kformer
