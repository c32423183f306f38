// One transformer block (see block.hpp).
#include "model/block.hpp"

#include "model/block_typed.hpp"

#include <algorithm>

#include "activations.hpp"
#include "comm/views.hpp"
#include "convert.hpp"
#include "layernorm.hpp"
#include "matmul_backward_gelu.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"

namespace kformer {
namespace kk = kernels;

namespace {
template <class T>
DV<T**> typed_view(const std::string& label, std::int64_t rows, std::int64_t cols) {
  return scratch<T**>(label, rows, cols);
}

template <class T>
void allocate(TypedActs<T>& t, const BlockDims& d, kk::AttentionKind kind, const kk::AttentionState<Exec>& shared,
              bool scores) {
  const int N = d.N(), R = d.rows();
  t.ln1 = typed_view<T>("ln1", R, d.C);
  t.ln2 = typed_view<T>("ln2", R, d.C);
  t.qkv = typed_view<T>("qkv", N, d.qkv_width());
  t.att_out = typed_view<T>("att_out", N, d.q_width());
  t.mlp_in = typed_view<T>("mlp_in", N, d.mlp_in_width());
  t.act = typed_view<T>("act", N, d.Fl);
  t.att.kind = kind;
  if (kk::keeps_probabilities(kind)) {
    if (scores) t.att.att = scratch<T****>("att", d.B, d.Hl, d.T, d.T);
    t.att.datt = shared.datt, t.att.chunk = shared.chunk;
  } else {
    t.att.lse = scratch<float***>("lse", d.B, d.Hl, d.T);
    t.att.delta = shared.delta;
  }
}
}  // namespace

BlockActs::BlockActs(const BlockDims& d, kk::AttentionKind kind, const kk::AttentionState<Exec>& shared, bool bf16,
                     bool scores) {
  const int R = d.rows();
  x_mid = scratch_view("x_mid", R, d.C);
  x_out = scratch_view("x_out", R, d.C);
  mean1 = scratch<float*>("mean1", R);
  rstd1 = scratch<float*>("rstd1", R);
  mean2 = scratch<float*>("mean2", R);
  rstd2 = scratch<float*>("rstd2", R);
  if (bf16)
    allocate(h, d, kind, shared, scores);
  else
    allocate(f, d, kind, shared, scores);
}

BlockScratch::BlockScratch(const BlockDims& d, kk::AttentionKind kind, bool bf16) {
  const int N = d.N();
  proj = scratch_view("proj", N, d.C);
  d_mid = scratch_view("d_mid", N, d.C);
  d_tmp = scratch_view("d_tmp", N, d.C);
  d_ln = scratch_view("d_ln", N, d.C);
  if (bf16) {
    // In bf16 these four are fp32 staging that is never live twice at once: the QKV and MLP-in
    // GEMMs' outputs in the forward (rounded into the activations at once), then in the backward
    // the MLP activation's gradient (rounded by the activation's backward) and, after it, the
    // attention output's gradient (rounded for the attention backward). One buffer holds them in turn.
    staging = scratch_view("fp32_staging", N, std::max({d.qkv_width(), d.mlp_in_width(), d.Fl, d.q_width()}));
    d_qkv = as_matrix(staging.data(), N, d.qkv_width());
    d_mlp_in = as_matrix(staging.data(), N, d.mlp_in_width());
    d_act = as_matrix(staging.data(), N, d.Fl);
    d_att_out = as_matrix(staging.data(), N, d.q_width());
  } else {
    d_att_out = scratch_view("d_att_out", N, d.q_width());
    d_qkv = scratch_view("d_qkv", N, d.qkv_width());
    d_mlp_in = scratch_view("d_mlp_in", N, d.mlp_in_width());
    d_act = scratch_view("d_act", N, d.Fl);
  }
  if (d.sp > 1) gathered = scratch_view("gathered", N, d.C);
  att.kind = kind;
  if (kk::keeps_probabilities(kind)) {
    att.chunk = 1;  // one sequence at a time (kernels/attention/attention.hpp); a bf16 batched_gemm keeps its dP in bf16
    if (!bf16 || kind == kk::AttentionKind::naive) att.datt = scratch<float****>("datt", 1, d.Hl, d.T, d.T);
  } else
    att.delta = scratch<float***>("delta", d.B, d.Hl, d.T);
  f = {d_qkv, d_mlp_in, {}, {}, gathered};
  if (bf16)
    h = {typed_view<kk::bf16>("d_qkv_bf16", N, d.qkv_width()), typed_view<kk::bf16>("d_mlp_in_bf16", N, d.mlp_in_width()),
         typed_view<kk::bf16>("dy_bf16", N, d.C), typed_view<kk::bf16>("d_att_out_bf16", N, d.q_width()),
         d.sp > 1 ? typed_view<kk::bf16>("gathered_bf16", N, d.C) : DV<kk::bf16**>()};
}

Block::Block(int layer, const BlockDims& dims, const ParamStore& params, comm::Communicator* tp, KernelChoice k)
    : d_(dims), p_(params), tp_(tp), k_(k), tp_root_(tp == nullptr || tp->rank() == 0) {
  const std::string prefix = "layers." + std::to_string(layer) + ".";
  for (std::size_t t = 0; t < refs_.size(); ++t) refs_[t] = p_.find(prefix + kBlockTensorLeaves[t]);
}

void Block::tp_allreduce(const DV<float**>& x, comm::Payload what) const {
  if (tp_ && tp_->size() > 1) comm::allreduce(*tp_, x, comm::ReduceOp::sum, comm::CallSite::carrying(what));
}

using block_typed::as_input;
using block_typed::btw;
using block_typed::with_backward_scratch;
using block_typed::gemm_out;
using block_typed::forward_stored;

void Block::forward(const DV<float**>& x_in, BlockActs& a, BlockScratch& s) const {
  if (d_.sp > 1 && k_.bf16) return forward_sp(x_in, a, a.h, s, s.h);
  if (d_.sp > 1) return forward_sp(x_in, a, a.f, s, s.f);
  if (k_.bf16)
    forward_t(x_in, a, a.h, s);
  else
    forward_t(x_in, a, a.f, s);
}

void Block::backward(const DV<float**>& x_in, const BlockActs& a, BlockScratch& s, const DV<float**>& dx) const {
  if (d_.sp > 1 && k_.bf16) return backward_sp(x_in, a, a.h, s, s.h, dx);
  if (d_.sp > 1) return backward_sp(x_in, a, a.f, s, s.f, dx);
  if (k_.bf16)
    backward_t(x_in, a, a.h, s, s.h, dx);
  else
    backward_t(x_in, a, a.f, s, s.f, dx);
}

template <class T>
void Block::forward_t(const DV<float**>& x_in, BlockActs& a, TypedActs<T>& t, BlockScratch& s) const {
  Exec exec;
  const DV<float*> none;
  // attention: norm -> column-parallel QKV -> attention -> row-parallel out (+ all-reduce)
  if (d_.gpt) {
    kk::layernorm_forward(exec, t.ln1, a.mean1, a.rstd1, x_in, p_.v(at(BlockTensor::ln1_w)), p_.v(at(BlockTensor::ln1_b)));
    forward_stored(exec, k_.gemm, t.qkv, s.d_qkv, {}, t.ln1, W<T>(BlockTensor::wq, 3), p_.v(at(BlockTensor::wq_b), 3));
  } else {
    const DV<float**> qkv32 = gemm_out(t.qkv, s.d_qkv);  // RoPE reads the fp32 result and stores it
    kk::rmsnorm_forward(exec, t.ln1, a.rstd1, x_in, p_.v(at(BlockTensor::attn_norm)));
    kk::matmul_forward(exec, k_.gemm, qkv32, t.ln1, W<T>(BlockTensor::wq, 3), none);
    kk::rope_forward(exec, btw(t.qkv, d_), btw(qkv32, d_), d_.Hl + d_.KVl, d_.hd, 0);
  }
  kk::attention_forward(exec, btw(t.att_out, d_), t.att, btw(t.qkv, d_), d_.Hl, d_.KVl);
  kk::matmul_forward(exec, k_.gemm, s.proj, t.att_out, W<T>(BlockTensor::wo),
                     d_.gpt && tp_root_ ? p_.v(at(BlockTensor::wo_b)) : none);
  tp_allreduce(s.proj, comm::Payload::activations);
  kk::residual_forward(exec, a.x_mid, x_in, s.proj);

  // MLP: norm -> column-parallel in -> activation -> row-parallel out (+ all-reduce)
  if (d_.gpt) {
    kk::layernorm_forward(exec, t.ln2, a.mean2, a.rstd2, a.x_mid, p_.v(at(BlockTensor::ln2_w)), p_.v(at(BlockTensor::ln2_b)));
    // GELU in the GEMM's epilogue (or read off the bf16 result): the same bits as gelu_forward on t.mlp_in
    forward_stored(exec, k_.gemm, t.mlp_in, s.d_mlp_in, t.act, t.ln2, W<T>(BlockTensor::fc), p_.v(at(BlockTensor::fc_b)));
    kk::matmul_forward(exec, k_.gemm, s.proj, t.act, W<T>(BlockTensor::proj),
                       tp_root_ ? p_.v(at(BlockTensor::proj_b)) : none);
  } else {
    kk::rmsnorm_forward(exec, t.ln2, a.rstd2, a.x_mid, p_.v(at(BlockTensor::mlp_norm)));
    forward_stored(exec, k_.gemm, t.mlp_in, s.d_mlp_in, {}, t.ln2, W<T>(BlockTensor::gate, 2), none);
    kk::swiglu_forward(exec, t.act, t.mlp_in);
    kk::matmul_forward(exec, k_.gemm, s.proj, t.act, W<T>(BlockTensor::down), none);
  }
  tp_allreduce(s.proj, comm::Payload::activations);
  kk::residual_forward(exec, a.x_out, a.x_mid, s.proj);
}

template <class T>
void Block::backward_t(const DV<float**>& x_in, const BlockActs& a, const TypedActs<T>& t, BlockScratch& s,
                       TypedScratch<T>& ts, const DV<float**>& dx) const {
  Exec exec;
  const DV<float*> none;
  // MLP: dx is the gradient of x_out = x_mid + mlp(x_mid); it is replicated over TP.
  if (d_.gpt) {
    // FC2 through the GELU in one call, which may add FC1's bias gradient itself (cuBLASLt's epilogue)
    const bool fc_bias_added =
        kk::matmul_backward_gelu(exec, k_.gemm, ts.d_mlp_in, p_.dv(at(BlockTensor::fc_b)), s.d_act,
                                 p_.dw(at(BlockTensor::proj)), p_.dv(at(BlockTensor::proj_b)), as_input(exec, dx, ts.dy),
                                 t.act, W<T>(BlockTensor::proj), t.mlp_in);
    kk::matmul_backward(exec, k_.gemm, s.d_ln, p_.dw(at(BlockTensor::fc)), fc_bias_added ? none : p_.dv(at(BlockTensor::fc_b)),
                        ts.d_mlp_in, t.ln2, W<T>(BlockTensor::fc));
    tp_allreduce(s.d_ln, comm::Payload::input_gradient);
    kk::layernorm_backward(exec, s.d_tmp, p_.dv(at(BlockTensor::ln2_w)), p_.dv(at(BlockTensor::ln2_b)), s.d_ln, a.x_mid,
                           p_.v(at(BlockTensor::ln2_w)), a.mean2, a.rstd2);
  } else {
    kk::matmul_backward(exec, k_.gemm, s.d_act, p_.dw(at(BlockTensor::down)), none, as_input(exec, dx, ts.dy), t.act,
                        W<T>(BlockTensor::down));
    kk::swiglu_backward(exec, ts.d_mlp_in, t.mlp_in, s.d_act);
    kk::matmul_backward(exec, k_.gemm, s.d_ln, p_.dw(at(BlockTensor::gate), 2), none, ts.d_mlp_in, t.ln2,
                        W<T>(BlockTensor::gate, 2));
    tp_allreduce(s.d_ln, comm::Payload::input_gradient);
    kk::rmsnorm_backward(exec, s.d_tmp, p_.dv(at(BlockTensor::mlp_norm)), s.d_ln, a.x_mid,
                         p_.v(at(BlockTensor::mlp_norm)), a.rstd2);
  }
  kk::residual_forward(exec, s.d_mid, dx, s.d_tmp, true);  // d x_mid = dx + d(norm branch)

  // attention
  kk::matmul_backward(exec, k_.gemm, s.d_att_out, p_.dw(at(BlockTensor::wo)),
                      d_.gpt ? p_.dv(at(BlockTensor::wo_b)) : none, as_input(exec, s.d_mid, ts.dy), t.att_out,
                      W<T>(BlockTensor::wo));
  kk::AttentionState<Exec, T> att = with_backward_scratch(t.att, s.att);
  kk::attention_backward(exec, btw(ts.d_qkv, d_), att, btw(as_input(exec, s.d_att_out, ts.d_att_out), d_),
                         btw(t.qkv, d_), btw(t.att_out, d_), d_.Hl, d_.KVl);
  if (d_.gpt) {
    kk::matmul_backward(exec, k_.gemm, s.d_ln, p_.dw(at(BlockTensor::wq), 3), p_.dv(at(BlockTensor::wq_b), 3),
                        ts.d_qkv, t.ln1, W<T>(BlockTensor::wq, 3));
    tp_allreduce(s.d_ln, comm::Payload::input_gradient);
    kk::layernorm_backward(exec, s.d_tmp, p_.dv(at(BlockTensor::ln1_w)), p_.dv(at(BlockTensor::ln1_b)), s.d_ln, x_in,
                           p_.v(at(BlockTensor::ln1_w)), a.mean1, a.rstd1);
  } else {
    kk::rope_backward(exec, btw(ts.d_qkv, d_), btw(ts.d_qkv, d_), d_.Hl + d_.KVl, d_.hd, 0);
    kk::matmul_backward(exec, k_.gemm, s.d_ln, p_.dw(at(BlockTensor::wq), 3), none, ts.d_qkv, t.ln1,
                        W<T>(BlockTensor::wq, 3));
    tp_allreduce(s.d_ln, comm::Payload::input_gradient);
    kk::rmsnorm_backward(exec, s.d_tmp, p_.dv(at(BlockTensor::attn_norm)), s.d_ln, x_in,
                         p_.v(at(BlockTensor::attn_norm)), a.rstd1);
  }
  kk::residual_forward(exec, dx, s.d_mid, s.d_tmp, true);  // d x_in = d x_mid + d(norm branch)
}

}  // namespace kformer
