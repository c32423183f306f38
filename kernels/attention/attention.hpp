// Causal grouped-query attention: the run-time choice between the `naive`, `fused`, `batched_gemm`
// and `vendor` (cuDNN) variants (deck key kernels.attention) and the buffers each keeps between
// forward and backward (batched_gemm keeps naive's, vendor fused's).
// Layout of qkv (B,T,(H+2KV)*hd) and out (B,T,H*hd): see attention_common.hpp.
#pragma once

#include "call_record.hpp"

#include "attention_batched.hpp"
#include "attention_fused.hpp"
#include "attention_fused_backward.hpp"
#include "attention_naive.hpp"
#include "attention_vendor.hpp"
#include "kernel_choice.hpp"

#include <string>
#include <type_traits>

namespace kformer::kernels {

// Saved state of one attention layer (`att` or `lse`) and the backward's scratch (`datt` or
// `delta`). Scratch may be shared between layers: copy the view into each layer's state.
// P is the element type of the stored probabilities (bf16 in mixed precision, where naive's
// forward computes its fp32 scores in `datt`, free until the backward; batched_gemm's are bf16,
// in `att` itself).
template <class ExecSpace, class P = float>
struct AttentionState {
  AttentionKind kind = AttentionKind::fused;
  DView<P****, ExecSpace> att;       // naive, batched_gemm: probabilities (B,H,T,T)
  DView<float****, ExecSpace> datt;  // naive (and fp32 batched_gemm) backward scratch (chunk,H,T,T); also
                                     // naive's forward scores when P is bf16
  DView<float***, ExecSpace> lse;    // fused, vendor: row logsumexp (B,H,T)
  DView<float***, ExecSpace> delta;  // fused backward scratch (B,H,T); vendor allocates it too, unused
  int chunk = 0;  // naive, batched_gemm: the sequences the backward (and a bf16 naive forward) take at once; 0: all
};

// A layer's state with the kept probabilities in P (bf16 under mixed precision: naive and
// batched_gemm keep them per layer, B*H*T*T), the scratch and the logsumexp in fp32. The scratch
// holds one sequence (chunk 1): B times less than the probabilities. A bf16 batched_gemm needs
// none: its dP is a kept bf16 buffer of those sequences (attention_batched.hpp).
template <class ExecSpace, class P>
AttentionState<ExecSpace, P> make_typed_attention_state(AttentionKind kind, int B, int T, int H) {
  AttentionState<ExecSpace, P> s;
  s.kind = kind;
  const auto noinit = [](const char* label) { return Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)); };
  if (keeps_probabilities(kind)) {
    s.att = DView<P****, ExecSpace>(noinit("kformer::attention_att"), B, H, T, T);
    if (std::is_same<P, float>::value || kind == AttentionKind::naive)
      s.datt = DView<float****, ExecSpace>(noinit("kformer::attention_datt"), 1, H, T, T);
    s.chunk = 1;
  } else {
    s.lse = DView<float***, ExecSpace>(noinit("kformer::attention_lse"), B, H, T);
    s.delta = DView<float***, ExecSpace>(noinit("kformer::attention_delta"), B, H, T);
  }
  return s;
}

// The same with fp32 probabilities.
template <class ExecSpace>
AttentionState<ExecSpace> make_attention_state(AttentionKind kind, int B, int T, int H) {
  return make_typed_attention_state<ExecSpace, float>(kind, B, T, H);
}

namespace detail {
// Sequences [b0, b0 + nb) of a LayoutRight view whose first extent is the batch: an unmanaged view
// of the same type and rank over them.
template <class V>
auto sequences(const V& v, int b0, int nb) {
  using U = Kokkos::View<typename V::data_type, Kokkos::LayoutRight, typename V::memory_space,
                         Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  if constexpr (V::rank == 3)
    return U(v.data() + std::size_t(b0) * v.stride(0), nb, v.extent(1), v.extent(2));
  else
    return U(v.data() + std::size_t(b0) * v.stride(0), nb, v.extent(1), v.extent(2), v.extent(3));
}
// Runs body(b0, nb) over the B sequences in chunks of as many as the naive scratch holds (each
// element is computed as in one call over all B: the chunks only bound the scratch).
// The record of causal attention over qkv (B,T,(H+2KV)hd): QK^T and AV over the causal half,
// twice that backward. Its bytes are the token-sized operands (the scores are the kind's own).
template <class QkvView>
KernelCall attention_call(AttentionKind kind, bool bf16, bool backward, const QkvView& qkv, int h, int kv,
                          double bytes) {
  const std::int64_t b = qkv.extent(0), t = qkv.extent(1), hd = std::int64_t(qkv.extent(2)) / (h + 2 * kv);
  const double flops = 2.0 * double(b) * h * double(t) * double(t) * double(hd) * (backward ? 2 : 1);
  return {Family::attention, bf16, backward, bytes, flops, {b, t, h, kv, hd, static_cast<int>(kind)}};
}

template <class State>
int sequences_at_once(const State& state, int B) {
  const int chunk = state.chunk > 0 ? state.chunk : B;
  return B < chunk ? B : chunk;
}
template <class State, class Body>
void by_sequences(const State& state, int B, const Body& body) {
  const int chunk = sequences_at_once(state, B);
  for (int b0 = 0; b0 < B; b0 += chunk) body(b0, B - b0 < chunk ? B - b0 : chunk);
}

// The buffers the backward keeps between calls (kept_buffer.hpp): batched_gemm's dP and d(scores) in
// bf16 probabilities' type and its fp32 sums for a bf16 dqkv (attention_batched.hpp), for the
// sequences it takes at once; cuDNN's workspace, which its flash backward fills with an fp32
// accumulator of dQ (the size the graph asks for is known on the GPU only: this is that bound).
template <class P, class TD, class State, class QkvView>
std::array<KeptBuffer, 2> backward_kept(const State& state, const QkvView& qkv, int h, int kv) {
  std::array<KeptBuffer, 2> kept{};
  const double b = sequences_at_once(state, static_cast<int>(qkv.extent(0))), t = double(qkv.extent(1));
  const double w = double(qkv.extent(2)), hd = w / (h + 2 * kv);
  if (state.kind == AttentionKind::batched_gemm) {
    if (!std::is_same<P, float>::value) kept[0] = {"kformer::attention_batched_ds", sizeof(P) * b * h * t * t};
    if (!std::is_same<TD, float>::value) kept[1] = {"kformer::attention_batched_sums", 4.0 * b * t * w};
  } else if (state.kind == AttentionKind::vendor) {
    kept[0] = {"kformer::cudnn_workspace", 4.0 * double(qkv.extent(0)) * t * h * hd};
  }
  return kept;
}
}  // namespace detail

// out (B,T,H*hd) from qkv (each float or bf16); fills the state's saved buffer.
template <class ExecSpace, class P, class OutView, class QkvView>
void attention_forward(const ExecSpace& exec, const OutView& out, AttentionState<ExecSpace, P>& state,
                       const QkvView& qkv, int n_heads, int n_kv_heads) {
  const Call call("attention_forward", [&] {
    return detail::attention_call(state.kind, holds_bf16<QkvView>, false, qkv, n_heads, n_kv_heads, bytes_of(out, qkv));
  });
  if (call.described()) return;
  if (state.kind == AttentionKind::fused) {
    attention_fused_forward(exec, out, state.lse, qkv, n_heads, n_kv_heads);
    return;
  }
  if (state.kind == AttentionKind::vendor) {  // throws where it does not run (a host backend, fp32)
    attention_vendor_forward(exec, out, state.lse, qkv, n_heads, n_kv_heads);
    return;
  }
  if (state.kind == AttentionKind::batched_gemm) {  // the scores in att itself, in P: no scratch
    attention_batched_forward(exec, out, state.att, qkv, n_heads, n_kv_heads);
    return;
  }
  if constexpr (std::is_same<P, float>::value) {  // the scores go into att itself: one call, no scratch
    attention_naive_forward(exec, out, state.att, qkv, n_heads, n_kv_heads);
  } else {  // bf16 probabilities: fp32 scores in the scratch, as many sequences at a time as it holds
    detail::by_sequences(state, static_cast<int>(qkv.extent(0)), [&](int b0, int nb) {
      const auto o = detail::sequences(out, b0, nb);
      const auto a = detail::sequences(state.att, b0, nb);
      const auto q = detail::sequences(qkv, b0, nb);
      const auto sc = detail::sequences(state.datt, 0, nb);
      attention_naive_forward(exec, o, a, q, n_heads, n_kv_heads, sc);
    });
  }
}

// dqkv (B,T,(H+2KV)*hd) from dout (B,T,H*hd) and the forward's qkv, out and state.
template <class ExecSpace, class P, class DqkvView, class DoutView, class QkvView, class OutView>
void attention_backward(const ExecSpace& exec, const DqkvView& dqkv, AttentionState<ExecSpace, P>& state,
                        const DoutView& dout, const QkvView& qkv, const OutView& out, int n_heads, int n_kv_heads) {
  const Call call("attention_backward", [&] {
    KernelCall c = detail::attention_call(state.kind, holds_bf16<QkvView>, true, qkv, n_heads, n_kv_heads,
                                          bytes_of(dqkv, dout, qkv, out));
    c.kept = detail::backward_kept<P, elem_t<DqkvView>>(state, qkv, n_heads, n_kv_heads);
    return c;
  });
  if (call.described()) return;
  if (state.kind == AttentionKind::fused) {
    attention_fused_backward(exec, dqkv, state.delta, dout, qkv, out, state.lse, n_heads, n_kv_heads);
    return;
  }
  if (state.kind == AttentionKind::vendor) {
    attention_vendor_backward(exec, dqkv, dout, qkv, out, state.lse, n_heads, n_kv_heads);
    return;
  }
  detail::by_sequences(state, static_cast<int>(qkv.extent(0)), [&](int b0, int nb) {
    const auto dq = detail::sequences(dqkv, b0, nb);
    const auto da = detail::sequences(state.datt, 0, nb);
    const auto dO = detail::sequences(dout, b0, nb);
    const auto q = detail::sequences(qkv, b0, nb);
    const auto a = detail::sequences(state.att, b0, nb);
    if (state.kind == AttentionKind::batched_gemm)
      attention_batched_backward(exec, dq, da, dO, q, a, n_heads, n_kv_heads);
    else
      attention_naive_backward(exec, dq, da, dO, q, a, n_heads, n_kv_heads);
  });
}

}  // namespace kformer::kernels
