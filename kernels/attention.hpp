// Causal grouped-query attention: the run-time choice between the `naive` and `fused` variants
// (deck key kernels.attention) and the buffers each keeps between forward and backward.
// Layout of qkv (B,T,(H+2KV)*hd) and out (B,T,H*hd): see attention_common.hpp.
#pragma once

#include "attention_fused.hpp"
#include "attention_fused_backward.hpp"
#include "attention_naive.hpp"

#include <string>

namespace kformer::kernels {

enum class AttentionKind { naive, fused };

// "naive" or "fused"; throws naming the valid values otherwise.
inline AttentionKind attention_kind_from_string(const std::string& s) {
  if (s == "naive") return AttentionKind::naive;
  if (s == "fused") return AttentionKind::fused;
  throw std::invalid_argument("kernels.attention: '" + s + "' is not one of naive, fused");
}

// Saved state of one attention layer (`att` or `lse`) and the backward's scratch (`datt` or
// `delta`). Scratch may be shared between layers: copy the view into each layer's state.
template <class ExecSpace>
struct AttentionState {
  AttentionKind kind = AttentionKind::fused;
  DView<float****, ExecSpace> att;   // naive: probabilities (B,H,T,T)
  DView<float****, ExecSpace> datt;  // naive backward scratch (B,H,T,T)
  DView<float***, ExecSpace> lse;    // fused: row logsumexp (B,H,T)
  DView<float***, ExecSpace> delta;  // fused backward scratch (B,H,T)
};

template <class ExecSpace>
AttentionState<ExecSpace> make_attention_state(AttentionKind kind, int B, int T, int H) {
  AttentionState<ExecSpace> s;
  s.kind = kind;
  const auto noinit = [](const char* label) { return Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)); };
  if (kind == AttentionKind::naive) {
    s.att = DView<float****, ExecSpace>(noinit("kformer::attention_att"), B, H, T, T);
    s.datt = DView<float****, ExecSpace>(noinit("kformer::attention_datt"), B, H, T, T);
  } else {
    s.lse = DView<float***, ExecSpace>(noinit("kformer::attention_lse"), B, H, T);
    s.delta = DView<float***, ExecSpace>(noinit("kformer::attention_delta"), B, H, T);
  }
  return s;
}

// out (B,T,H*hd) from qkv; fills the state's saved buffer.
template <class ExecSpace>
void attention_forward(const ExecSpace& exec, const DView<float***, ExecSpace>& out, AttentionState<ExecSpace>& state,
                       const DView<const float***, ExecSpace>& qkv, int n_heads, int n_kv_heads) {
  if (state.kind == AttentionKind::naive)
    attention_naive_forward(exec, out, state.att, qkv, n_heads, n_kv_heads);
  else
    attention_fused_forward(exec, out, state.lse, qkv, n_heads, n_kv_heads);
}

// dqkv (B,T,(H+2KV)*hd) from dout (B,T,H*hd) and the forward's qkv, out and state.
template <class ExecSpace>
void attention_backward(const ExecSpace& exec, const DView<float***, ExecSpace>& dqkv,
                        AttentionState<ExecSpace>& state, const DView<const float***, ExecSpace>& dout,
                        const DView<const float***, ExecSpace>& qkv, const DView<const float***, ExecSpace>& out,
                        int n_heads, int n_kv_heads) {
  if (state.kind == AttentionKind::naive)
    attention_naive_backward(exec, dqkv, state.datt, dout, qkv, state.att, n_heads, n_kv_heads);
  else
    attention_fused_backward(exec, dqkv, state.delta, dout, qkv, out, state.lse, n_heads, n_kv_heads);
}

}  // namespace kformer::kernels
