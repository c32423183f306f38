// One block under sequence parallelism (Megatron-LM's, with tensor parallelism; see block.hpp).
// A TP rank holds R = N/tp rows (tokens) of the block's input, its residual stream and its norms'
// outputs: rows [rank*R, (rank+1)*R) of the (N,C) matrices every rank held whole before. Before a
// column-parallel projection the norm's output is all-gathered (N,C); after a row-parallel one
// the partial sums are reduce-scattered to R rows instead of all-reduced. Backward mirrors it:
// the output gradient of a row-parallel projection is all-gathered, the input gradient of a
// column-parallel one reduce-scattered, and the gathered norm outputs the weight gradients need
// are gathered again rather than kept. Under zb-h1 the backward's input part (B) runs here
// without the weight halves, and block_split.cpp's W gathers its operands again. The norms'
// weight gradients sum over this rank's rows only: the stage all-reduces them over TP once per
// iteration (Stage::unit_done, on the last micro-batch).
// One body for both precisions (T = float or bf16, as Block::forward_t/backward_t): in bf16 the
// norms' outputs are gathered in bf16, the gradients gathered in fp32 and rounded once after.
#include "activations.hpp"
#include "model/block.hpp"
#include "model/block_typed.hpp"
#include "comm/views.hpp"
#include "layernorm.hpp"
#include "matmul_backward_gelu.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"

namespace kformer {
namespace kk = kernels;
using block_typed::as_input;
using block_typed::btw;
using block_typed::with_backward_scratch;
using block_typed::first_rows;
using block_typed::gemm_out;
using block_typed::forward_stored;
using block_typed::whole_of;

template <class T>
void Block::forward_sp(const DV<float**>& x_in, BlockActs& a, TypedActs<T>& t, BlockScratch& s,
                       TypedScratch<T>& ts) const {
  Exec exec;
  const DV<float*> none;
  const DV<float**> part = first_rows(s.d_tmp, d_.rows());  // this rank's rows of a reduce-scatter
  if (d_.gpt)
    kk::layernorm_forward(exec, t.ln1, a.mean1, a.rstd1, x_in, p_.v(at(BlockTensor::ln1_w)), p_.v(at(BlockTensor::ln1_b)));
  else
    kk::rmsnorm_forward(exec, t.ln1, a.rstd1, x_in, p_.v(at(BlockTensor::attn_norm)));
  comm::allgather(*tp_, t.ln1, ts.gathered, comm::CallSite::carrying(comm::Payload::activations));
  if (d_.gpt) {
    forward_stored(exec, k_.gemm, t.qkv, s.d_qkv, {}, ts.gathered, W<T>(BlockTensor::wq, 3), p_.v(at(BlockTensor::wq_b), 3));
  } else {
    const DV<float**> qkv32 = gemm_out(t.qkv, s.d_qkv);  // RoPE reads the fp32 result and stores it
    kk::matmul_forward(exec, k_.gemm, qkv32, ts.gathered, W<T>(BlockTensor::wq, 3), none);
    kk::rope_forward(exec, btw(t.qkv, d_), btw(qkv32, d_), d_.Hl + d_.KVl, d_.hd, 0);
  }
  kk::attention_forward(exec, btw(t.att_out, d_), t.att, btw(t.qkv, d_), d_.Hl, d_.KVl);
  kk::matmul_forward(exec, k_.gemm, s.proj, t.att_out, W<T>(BlockTensor::wo),
                     d_.gpt && tp_root_ ? p_.v(at(BlockTensor::wo_b)) : none);
  comm::reduce_scatter(*tp_, s.proj, part, comm::ReduceOp::sum, comm::CallSite::carrying(comm::Payload::activations));
  kk::residual_forward(exec, a.x_mid, x_in, part);

  if (d_.gpt)
    kk::layernorm_forward(exec, t.ln2, a.mean2, a.rstd2, a.x_mid, p_.v(at(BlockTensor::ln2_w)), p_.v(at(BlockTensor::ln2_b)));
  else
    kk::rmsnorm_forward(exec, t.ln2, a.rstd2, a.x_mid, p_.v(at(BlockTensor::mlp_norm)));
  comm::allgather(*tp_, t.ln2, ts.gathered, comm::CallSite::carrying(comm::Payload::activations));
  if (d_.gpt) {
    // GELU in the GEMM's epilogue (or read off the bf16 result): the same bits as gelu_forward on t.mlp_in
    forward_stored(exec, k_.gemm, t.mlp_in, s.d_mlp_in, t.act, ts.gathered, W<T>(BlockTensor::fc),
                   p_.v(at(BlockTensor::fc_b)));
    kk::matmul_forward(exec, k_.gemm, s.proj, t.act, W<T>(BlockTensor::proj),
                       tp_root_ ? p_.v(at(BlockTensor::proj_b)) : none);
  } else {
    forward_stored(exec, k_.gemm, t.mlp_in, s.d_mlp_in, {}, ts.gathered, W<T>(BlockTensor::gate, 2), none);
    kk::swiglu_forward(exec, t.act, t.mlp_in);
    kk::matmul_forward(exec, k_.gemm, s.proj, t.act, W<T>(BlockTensor::down), none);
  }
  comm::reduce_scatter(*tp_, s.proj, part, comm::ReduceOp::sum, comm::CallSite::carrying(comm::Payload::activations));
  kk::residual_forward(exec, a.x_out, a.x_mid, part);
}

template <class T>
void Block::backward_sp(const DV<float**>& x_in, const BlockActs& a, const TypedActs<T>& t, BlockScratch& s,
                        TypedScratch<T>& ts, const DV<float**>& dx, bool input_only) const {
  Exec exec;
  const DV<float*> none;
  const int R = d_.rows();
  const DV<float**> d_part = first_rows(s.proj, R), d_norm = first_rows(s.d_tmp, R), d_mid = first_rows(s.d_mid, R);
  // The communicator orders its calls after the compute queued before them. Gradients are
  // gathered in fp32 (s.gathered) and read by the GEMMs as T; norm outputs gathered as T (only
  // for the weight gradients: input_only skips them).
  const auto gather_grad = [&](const DV<float**>& rows) {
    return as_input(exec, whole_of(tp_, d_.sp, rows, s.gathered, comm::CallSite::carrying(comm::Payload::activations)), ts.dy);
  };
  const auto gather_norm = [&](const DV<T**>& rows) {
    if (!input_only) whole_of(tp_, d_.sp, rows, ts.gathered, comm::CallSite::carrying(comm::Payload::weight_input));
  };
  const auto scatter = [&](const DV<float**>& whole) { comm::reduce_scatter(*tp_, whole, d_part, comm::ReduceOp::sum,
                                                       comm::CallSite::carrying(comm::Payload::input_gradient)); };
  // A projection's backward (dy: its output gradient, in: its input): whole, or only its input
  // half (zb-h1's B, Block::backward_input; W adds the weight and bias gradients later).
  // with_bias: whether the layer's bias gradient is to be added here (GPT's, unless added already).
  const auto project = [&](const DV<float**>& d_in, BlockTensor w, int count, BlockTensor bias, const DV<T**>& dy,
                           const DV<T**>& in, bool with_bias) {
    if (input_only)
      block_typed::matmul_backward_input(k_.gemm, d_in, dy, W<T>(w, count));
    else
      kk::matmul_backward(exec, k_.gemm, d_in, p_.dw(at(w), count), with_bias ? p_.dv(at(bias), count) : none, dy,
                          in, W<T>(w, count));
  };
  // MLP: the gradient of x_out = x_mid + mlp(x_mid), this rank's rows of it in dx. GPT's FC2
  // backward goes through the GELU in one call, which may add FC1's bias gradient itself.
  bool fc_bias_added = false;
  if (d_.gpt && !input_only) {
    fc_bias_added = kk::matmul_backward_gelu(exec, k_.gemm, ts.d_mlp_in, p_.dv(at(BlockTensor::fc_b)), s.d_act,
                                             p_.dw(at(BlockTensor::proj)), p_.dv(at(BlockTensor::proj_b)),
                                             gather_grad(dx), t.act, W<T>(BlockTensor::proj), t.mlp_in);
  } else {
    project(s.d_act, d_.gpt ? BlockTensor::proj : BlockTensor::down, 1, BlockTensor::proj_b, gather_grad(dx), t.act,
            d_.gpt);
    if (d_.gpt) kk::gelu_backward(exec, ts.d_mlp_in, t.mlp_in, s.d_act);
    else kk::swiglu_backward(exec, ts.d_mlp_in, t.mlp_in, s.d_act);
  }
  gather_norm(t.ln2);
  project(s.d_ln, d_.gpt ? BlockTensor::fc : BlockTensor::gate, d_.gpt ? 1 : 2, BlockTensor::fc_b, ts.d_mlp_in,
          ts.gathered, d_.gpt && !fc_bias_added);
  scatter(s.d_ln);
  if (d_.gpt)
    kk::layernorm_backward(exec, d_norm, p_.dv(at(BlockTensor::ln2_w)), p_.dv(at(BlockTensor::ln2_b)), d_part, a.x_mid,
                           p_.v(at(BlockTensor::ln2_w)), a.mean2, a.rstd2);
  else
    kk::rmsnorm_backward(exec, d_norm, p_.dv(at(BlockTensor::mlp_norm)), d_part, a.x_mid, p_.v(at(BlockTensor::mlp_norm)),
                         a.rstd2);
  kk::residual_forward(exec, d_mid, dx, d_norm, true);

  // attention
  project(s.d_att_out, BlockTensor::wo, 1, BlockTensor::wo_b, gather_grad(d_mid), t.att_out, d_.gpt);
  kk::AttentionState<Exec, T> att = with_backward_scratch(t.att, s.att);
  kk::attention_backward(exec, btw(ts.d_qkv, d_), att, btw(as_input(exec, s.d_att_out, ts.d_att_out), d_),
                         btw(t.qkv, d_), btw(t.att_out, d_), d_.Hl, d_.KVl);
  if (!d_.gpt) kk::rope_backward(exec, btw(ts.d_qkv, d_), btw(ts.d_qkv, d_), d_.Hl + d_.KVl, d_.hd, 0);
  gather_norm(t.ln1);
  project(s.d_ln, BlockTensor::wq, 3, BlockTensor::wq_b, ts.d_qkv, ts.gathered, d_.gpt);
  scatter(s.d_ln);
  if (d_.gpt)
    kk::layernorm_backward(exec, d_norm, p_.dv(at(BlockTensor::ln1_w)), p_.dv(at(BlockTensor::ln1_b)), d_part, x_in,
                           p_.v(at(BlockTensor::ln1_w)), a.mean1, a.rstd1);
  else
    kk::rmsnorm_backward(exec, d_norm, p_.dv(at(BlockTensor::attn_norm)), d_part, x_in, p_.v(at(BlockTensor::attn_norm)),
                         a.rstd1);
  kk::residual_forward(exec, dx, d_mid, d_norm, true);
}

template void Block::forward_sp(const DV<float**>&, BlockActs&, TypedActs<float>&, BlockScratch&,
                                TypedScratch<float>&) const;
template void Block::forward_sp(const DV<float**>&, BlockActs&, TypedActs<kk::bf16>&, BlockScratch&,
                                TypedScratch<kk::bf16>&) const;
template void Block::backward_sp(const DV<float**>&, const BlockActs&, const TypedActs<float>&, BlockScratch&,
                                 TypedScratch<float>&, const DV<float**>&, bool) const;
template void Block::backward_sp(const DV<float**>&, const BlockActs&, const TypedActs<kk::bf16>&, BlockScratch&,
                                 TypedScratch<kk::bf16>&, const DV<float**>&, bool) const;

}  // namespace kformer
