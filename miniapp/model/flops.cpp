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
  if (mode == Recompute::selective && attention == kernels::AttentionKind::naive)
    return 2.0 * d.B * d.Hl * double(d.T) * d.T * d.hd;
  return 0;
}

Flops head_flops(std::int64_t tokens, int d_model, int vocab_rows) {
  const double f = 2.0 * double(tokens) * d_model * vocab_rows;
  return {f, 2 * f};
}

double closed_form_flops_per_token(const ModelShape& s, int seq_len) {
  const double C = s.d_model, Q = double(s.n_heads) * s.head_dim, KV = double(s.n_kv_heads) * s.head_dim;
  const double mlp = s.gpt ? 2 * C * s.ffn_dim : 3 * C * s.ffn_dim;
  const double per_layer = C * (Q + 2 * KV) + Q * C + mlp;
  const double matmul_params = s.n_layers * per_layer + double(s.vocab_padded) * C;
  return 6 * matmul_params + 6.0 * s.n_layers * seq_len * C;
}

}  // namespace kformer
