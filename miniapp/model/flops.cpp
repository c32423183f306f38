// Model FLOPs (see flops.hpp).
#include "model/flops.hpp"

namespace kformer {

Flops block_flops(const BlockDims& d) {
  const double N = d.N(), C = d.C;
  double f = 2 * N * C * d.qkv_width()      // QKV
             + 2 * N * d.q_width() * C      // attention out
             + 2 * N * C * d.mlp_in_width() // MLP in (fc, or gate and up)
             + 2 * N * d.Fl * C;            // MLP out
  f += 2.0 * d.B * d.Hl * double(d.T) * d.T * d.hd;  // QK^T and AV, causal half of 4*B*H*T*T*hd
  return {f, 2 * f};
}

double recompute_flops(const BlockDims& d, Recompute mode, kernels::AttentionKind attention) {
  if (mode == Recompute::full) return block_flops(d).forward;
  if (mode == Recompute::selective && kernels::keeps_probabilities(attention))
    return 2.0 * d.B * d.Hl * double(d.T) * d.T * d.hd;
  if (mode == Recompute::op)  // K, the output projection and up
    return 2.0 * d.N() * d.C * (double(d.KVl) * d.hd + d.q_width() + d.Fl);
  return 0;
}

Flops head_flops(std::int64_t tokens, int d_model, int vocab_rows) {
  const double f = 2.0 * double(tokens) * d_model * vocab_rows;
  return {f, 2 * f};
}

namespace {
double block_matmul_params(const ModelShape& s) {  // one block's QKV, output projection and MLP
  const double C = s.d_model, Q = double(s.n_heads) * s.head_dim, KV = double(s.n_kv_heads) * s.head_dim;
  const double mlp = s.gpt ? 2 * C * s.ffn_dim : 3 * C * s.ffn_dim;
  return C * (Q + 2 * KV) + Q * C + mlp;
}
}  // namespace

double closed_form_flops_per_token(const ModelShape& s, int seq_len) {
  const double C = s.d_model;
  const double matmul_params = s.n_layers * block_matmul_params(s) + double(s.vocab_padded) * C;
  return 6 * matmul_params + 6.0 * s.n_layers * seq_len * C;
}

double model_flops_per_token(const ModelShape& s, int seq_len) {
  const double Q = double(s.n_heads) * s.head_dim;
  const double matmul_params = s.n_layers * block_matmul_params(s) + double(s.vocab_padded) * s.d_model;
  return 6 * matmul_params + 12.0 * s.n_layers * seq_len * Q;
}

double recompute_flops_per_token(const ModelShape& s, int seq_len, Recompute mode, kernels::AttentionKind attention,
                                 int full_layers) {
  const double attention_layer = 4.0 * seq_len * double(s.n_heads) * s.head_dim;
  const double attention_forward = s.n_layers * attention_layer;
  if (mode == Recompute::full) return full_layers * (2 * block_matmul_params(s) + attention_layer);
  if (mode == Recompute::selective && kernels::keeps_probabilities(attention)) return attention_forward;
  if (mode == Recompute::op)  // K, the output projection and up of every block
    return 2.0 * s.n_layers * s.d_model * (double(s.n_kv_heads) * s.head_dim + double(s.n_heads) * s.head_dim + s.ffn_dim);
  return 0;
}

}  // namespace kformer
