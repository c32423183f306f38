// train.recompute=op, torchtitan's selective op policy for Llama blocks (see recompute.hpp): what a
// block keeps of its forward, and the part of the forward it re-runs before its backward.
// torchtitan saves the outputs of every other matmul of a block (wq, wv, w1 and w2 of its seven) and
// of the attention, and recomputes the rest; kformer's QKV and gate/up projections are one GEMM
// each, so Q and V (post-RoPE) and the gate are copied out of the packed outputs after the forward,
// K and up are re-run from their rows of the packed weights and the packed buffers put back together.
// Shapes: N = B*T tokens, C = d_model, Hl, KVl the rank's heads, hd the head size, Fl the MLP width.
#include "model/recompute.hpp"

#include <stdexcept>

#include "activations.hpp"
#include "convert.hpp"
#include "model/block_typed.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"

namespace kformer {
namespace kk = kernels;

namespace {
template <class T>
void own_typed(TypedActs<T>& t, const BlockDims& d) {
  t.att_out = scratch<T**>("att_out", d.N(), d.q_width());
  if (kk::keeps_probabilities(t.att.kind))
    t.att.att = scratch<T****>("att", d.B, d.Hl, d.T, d.T);
  else
    t.att.lse = scratch<float***>("lse", d.B, d.Hl, d.T);
  t.qv = scratch<T**>("qv", d.N(), (d.Hl + d.KVl) * d.hd);
  t.gate = scratch<T**>("gate", d.N(), d.Fl);
}
}  // namespace

void BlockActs::own_op_buffers(const BlockDims& d, bool bf16) {
  x_out = scratch_view("x_out", d.rows(), d.C);
  if (bf16)
    own_typed(h, d);
  else
    own_typed(f, d);
}

void Block::keep_for_recompute(BlockActs& a) const {
  if (k_.bf16)
    keep_for_recompute_t(a.h);
  else
    keep_for_recompute_t(a.f);
}

void Block::recompute_op(const DV<float**>& x_in, BlockActs& a, BlockScratch& s) const {
  if (d_.gpt || d_.sp > 1) throw std::logic_error("train.recompute=op runs llama blocks without sequence parallelism");
  if (k_.bf16)
    recompute_op_t(x_in, a, a.h, s, s.h);
  else
    recompute_op_t(x_in, a, a.f, s, s.f);
}

template <class T>
void Block::keep_for_recompute_t(TypedActs<T>& t) const {
  Exec exec;
  const int q = d_.q_width(), kv = d_.KVl * d_.hd;
  kk::copy_columns(exec, t.qv, 0, t.qkv, 0, q);         // Q, rotated
  kk::copy_columns(exec, t.qv, q, t.qkv, q + kv, kv);   // V
  kk::copy_columns(exec, t.gate, 0, t.mlp_in, 0, d_.Fl);  // the gate, SwiGLU's silu input
}

template <class T>
void Block::recompute_op_t(const DV<float**>& x_in, BlockActs& a, TypedActs<T>& t, BlockScratch& s,
                           TypedScratch<T>& ts) const {
  Exec exec;
  const DV<float*> none;
  const int N = d_.N(), q = d_.q_width(), kv = d_.KVl * d_.hd;
  // attention's norm; K from it (fp32, as the forward's packed GEMM wrote it), rotated; QKV put back
  kk::rmsnorm_forward(exec, t.ln1, a.rstd1, x_in, p_.v(at(BlockTensor::attn_norm)));
  const DV<float**> k32 = as_matrix(s.d_qkv.data(), N, kv);
  kk::matmul_forward(exec, k_.gemm, k32, t.ln1, W<T>(BlockTensor::wk), none);
  kk::rope_forward(exec, block_typed::btw(k32, d_), block_typed::btw(k32, d_), d_.KVl, d_.hd, 0);
  kk::copy_columns(exec, t.qkv, 0, t.qv, 0, q);
  kk::copy_columns(exec, t.qkv, q, k32, 0, kv);
  kk::copy_columns(exec, t.qkv, q + kv, t.qv, q, kv);
  // the output projection (summed over TP) and the residual; the MLP's norm; up beside the gate; SwiGLU
  kk::matmul_forward(exec, k_.gemm, s.proj, t.att_out, W<T>(BlockTensor::wo), none);
  tp_allreduce(s.proj, comm::Payload::activations);
  kk::residual_forward(exec, a.x_mid, x_in, s.proj);
  kk::rmsnorm_forward(exec, t.ln2, a.rstd2, a.x_mid, p_.v(at(BlockTensor::mlp_norm)));
  const DV<T**> up = block_typed::Unmanaged2<T>(ts.d_mlp_in.data(), N, d_.Fl);  // stored as the forward stores it
  block_typed::forward_stored(exec, k_.gemm, up, s.d_mlp_in, DV<T**>(), t.ln2, W<T>(BlockTensor::up), none);
  kk::copy_columns(exec, t.mlp_in, 0, t.gate, 0, d_.Fl);
  kk::copy_columns(exec, t.mlp_in, d_.Fl, up, 0, d_.Fl);
  kk::swiglu_forward(exec, t.act, t.mlp_in);
}

}  // namespace kformer
