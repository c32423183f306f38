// One transformer block (see block.hpp).
#include "block.hpp"

#include "activations.hpp"
#include "comm/views.hpp"
#include "layernorm.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"

namespace kformer {
namespace kk = kernels;

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
  return d;
}

BlockActs::BlockActs(const BlockDims& d, kk::AttentionKind kind, const kk::AttentionState<Exec>& shared, bool scores) {
  const int N = d.N(), R = d.rows();
  ln1 = scratch_view("ln1", R, d.C);
  ln2 = scratch_view("ln2", R, d.C);
  x_mid = scratch_view("x_mid", R, d.C);
  x_out = scratch_view("x_out", R, d.C);
  mean1 = scratch<float*>("mean1", R);
  rstd1 = scratch<float*>("rstd1", R);
  mean2 = scratch<float*>("mean2", R);
  rstd2 = scratch<float*>("rstd2", R);
  qkv = scratch_view("qkv", N, d.qkv_width());
  att_out = scratch_view("att_out", N, d.q_width());
  mlp_in = scratch_view("mlp_in", N, d.mlp_in_width());
  act = scratch_view("act", N, d.Fl);
  att.kind = kind;
  if (kind == kk::AttentionKind::naive) {
    if (scores) att.att = scratch<float****>("att", d.B, d.Hl, d.T, d.T);
    att.datt = shared.datt;
  } else {
    att.lse = scratch<float***>("lse", d.B, d.Hl, d.T);
    att.delta = shared.delta;
  }
}

BlockScratch::BlockScratch(const BlockDims& d, kk::AttentionKind kind) {
  const int N = d.N();
  proj = scratch_view("proj", N, d.C);
  d_mid = scratch_view("d_mid", N, d.C);
  d_tmp = scratch_view("d_tmp", N, d.C);
  d_ln = scratch_view("d_ln", N, d.C);
  d_att_out = scratch_view("d_att_out", N, d.q_width());
  d_qkv = scratch_view("d_qkv", N, d.qkv_width());
  d_mlp_in = scratch_view("d_mlp_in", N, d.mlp_in_width());
  d_act = scratch_view("d_act", N, d.Fl);
  if (d.sp > 1) gathered = scratch_view("gathered", N, d.C);
  att.kind = kind;
  if (kind == kk::AttentionKind::naive)
    att.datt = scratch<float****>("datt", d.B, d.Hl, d.T, d.T);
  else
    att.delta = scratch<float***>("delta", d.B, d.Hl, d.T);
}

Block::Block(int layer, const BlockDims& dims, const ParamStore& params, comm::Communicator* tp, KernelChoice k)
    : prefix_("layers." + std::to_string(layer) + "."), d_(dims), p_(params), tp_(tp), k_(k),
      tp_root_(tp == nullptr || tp->rank() == 0) {}

void Block::tp_allreduce(const DV<float**>& x) const {
  if (tp_ && tp_->size() > 1) comm::allreduce(*tp_, x, comm::ReduceOp::sum);
}

namespace {
DV<float***> btw(const DV<float**>& x, const BlockDims& d) {  // (N,W) read as (B,T,W)
  return as_tensor3(x.data(), d.B, d.T, x.extent(1));
}
}  // namespace

void Block::forward(const DV<float**>& x_in, BlockActs& a, BlockScratch& s) const {
  if (d_.sp > 1) return forward_sp(x_in, a, s);
  Exec exec;
  const DV<float*> none;
  // attention: norm -> column-parallel QKV -> attention -> row-parallel out (+ all-reduce)
  if (d_.gpt) {
    kk::layernorm_forward(exec, a.ln1, a.mean1, a.rstd1, x_in, p_.v(name("ln1.weight")), p_.v(name("ln1.bias")));
    kk::matmul_forward(exec, k_.gemm, a.qkv, a.ln1, p_.w(name("attn.wq.weight"), 3), p_.v(name("attn.wq.bias"), 3));
  } else {
    kk::rmsnorm_forward(exec, a.ln1, a.rstd1, x_in, p_.v(name("attn_norm.weight")));
    kk::matmul_forward(exec, k_.gemm, a.qkv, a.ln1, p_.w(name("attn.wq.weight"), 3), none);
    kk::rope_forward(exec, btw(a.qkv, d_), btw(a.qkv, d_), d_.Hl + d_.KVl, d_.hd, 0);
  }
  kk::attention_forward(exec, btw(a.att_out, d_), a.att, btw(a.qkv, d_), d_.Hl, d_.KVl);
  kk::matmul_forward(exec, k_.gemm, s.proj, a.att_out, p_.w(name("attn.wo.weight")),
                     d_.gpt && tp_root_ ? p_.v(name("attn.wo.bias")) : none);
  tp_allreduce(s.proj);
  kk::residual_forward(exec, a.x_mid, x_in, s.proj);

  // MLP: norm -> column-parallel in -> activation -> row-parallel out (+ all-reduce)
  if (d_.gpt) {
    kk::layernorm_forward(exec, a.ln2, a.mean2, a.rstd2, a.x_mid, p_.v(name("ln2.weight")), p_.v(name("ln2.bias")));
    kk::matmul_forward(exec, k_.gemm, a.mlp_in, a.ln2, p_.w(name("mlp.fc.weight")), p_.v(name("mlp.fc.bias")));
    kk::gelu_forward(exec, a.act, a.mlp_in);
    kk::matmul_forward(exec, k_.gemm, s.proj, a.act, p_.w(name("mlp.proj.weight")),
                       tp_root_ ? p_.v(name("mlp.proj.bias")) : none);
  } else {
    kk::rmsnorm_forward(exec, a.ln2, a.rstd2, a.x_mid, p_.v(name("mlp_norm.weight")));
    kk::matmul_forward(exec, k_.gemm, a.mlp_in, a.ln2, p_.w(name("mlp.gate.weight"), 2), none);
    kk::swiglu_forward(exec, a.act, a.mlp_in);
    kk::matmul_forward(exec, k_.gemm, s.proj, a.act, p_.w(name("mlp.down.weight")), none);
  }
  tp_allreduce(s.proj);
  kk::residual_forward(exec, a.x_out, a.x_mid, s.proj);
}

void Block::backward(const DV<float**>& x_in, const BlockActs& a, BlockScratch& s, const DV<float**>& dx) const {
  if (d_.sp > 1) return backward_sp(x_in, a, s, dx);
  Exec exec;
  const DV<float*> none;
  // MLP: dx is the gradient of x_out = x_mid + mlp(x_mid); it is replicated over TP.
  if (d_.gpt) {
    kk::matmul_backward(exec, k_.gemm, s.d_act, p_.dw(name("mlp.proj.weight")), p_.dv(name("mlp.proj.bias")), dx,
                        a.act, p_.w(name("mlp.proj.weight")));
    kk::gelu_backward(exec, s.d_mlp_in, a.mlp_in, s.d_act);
    kk::matmul_backward(exec, k_.gemm, s.d_ln, p_.dw(name("mlp.fc.weight")), p_.dv(name("mlp.fc.bias")), s.d_mlp_in,
                        a.ln2, p_.w(name("mlp.fc.weight")));
    tp_allreduce(s.d_ln);
    kk::layernorm_backward(exec, s.d_tmp, p_.dv(name("ln2.weight")), p_.dv(name("ln2.bias")), s.d_ln, a.x_mid,
                           p_.v(name("ln2.weight")), a.mean2, a.rstd2);
  } else {
    kk::matmul_backward(exec, k_.gemm, s.d_act, p_.dw(name("mlp.down.weight")), none, dx, a.act,
                        p_.w(name("mlp.down.weight")));
    kk::swiglu_backward(exec, s.d_mlp_in, a.mlp_in, s.d_act);
    kk::matmul_backward(exec, k_.gemm, s.d_ln, p_.dw(name("mlp.gate.weight"), 2), none, s.d_mlp_in, a.ln2,
                        p_.w(name("mlp.gate.weight"), 2));
    tp_allreduce(s.d_ln);
    kk::rmsnorm_backward(exec, s.d_tmp, p_.dv(name("mlp_norm.weight")), s.d_ln, a.x_mid,
                         p_.v(name("mlp_norm.weight")), a.rstd2);
  }
  kk::residual_forward(exec, s.d_mid, dx, s.d_tmp);  // d x_mid = dx + d(norm branch)

  // attention
  kk::matmul_backward(exec, k_.gemm, s.d_att_out, p_.dw(name("attn.wo.weight")),
                      d_.gpt ? p_.dv(name("attn.wo.bias")) : none, s.d_mid, a.att_out, p_.w(name("attn.wo.weight")));
  kk::AttentionState<Exec> att = a.att;
  att.datt = s.att.datt;
  att.delta = s.att.delta;
  kk::attention_backward(exec, btw(s.d_qkv, d_), att, btw(s.d_att_out, d_), btw(a.qkv, d_), btw(a.att_out, d_), d_.Hl,
                         d_.KVl);
  if (d_.gpt) {
    kk::matmul_backward(exec, k_.gemm, s.d_ln, p_.dw(name("attn.wq.weight"), 3), p_.dv(name("attn.wq.bias"), 3),
                        s.d_qkv, a.ln1, p_.w(name("attn.wq.weight"), 3));
    tp_allreduce(s.d_ln);
    kk::layernorm_backward(exec, s.d_tmp, p_.dv(name("ln1.weight")), p_.dv(name("ln1.bias")), s.d_ln, x_in,
                           p_.v(name("ln1.weight")), a.mean1, a.rstd1);
  } else {
    kk::rope_backward(exec, btw(s.d_qkv, d_), btw(s.d_qkv, d_), d_.Hl + d_.KVl, d_.hd, 0);
    kk::matmul_backward(exec, k_.gemm, s.d_ln, p_.dw(name("attn.wq.weight"), 3), none, s.d_qkv, a.ln1,
                        p_.w(name("attn.wq.weight"), 3));
    tp_allreduce(s.d_ln);
    kk::rmsnorm_backward(exec, s.d_tmp, p_.dv(name("attn_norm.weight")), s.d_ln, x_in,
                         p_.v(name("attn_norm.weight")), a.rstd1);
  }
  kk::residual_forward(exec, dx, s.d_mid, s.d_tmp);  // d x_in = d x_mid + d(norm branch)
}

}  // namespace kformer
