// One block under sequence parallelism (Megatron-LM's, with tensor parallelism; see block.hpp).
// A TP rank holds R = N/tp rows (tokens) of the block's input, its residual stream and its norms'
// outputs: rows [rank*R, (rank+1)*R) of the (N,C) matrices every rank held whole before. Before a
// column-parallel projection the norm's output is all-gathered (N,C); after a row-parallel one
// the partial sums are reduce-scattered to R rows instead of all-reduced. Backward mirrors it:
// the output gradient of a row-parallel projection is all-gathered, the input gradient of a
// column-parallel one reduce-scattered, and the gathered norm outputs the weight gradients need
// are gathered again rather than kept. The norms' weight gradients sum over this rank's rows
// only: the stage all-reduces them over TP once per iteration (Stage::reduce_sequence_parallel).
#include "activations.hpp"
#include "block.hpp"
#include "comm/views.hpp"
#include "layernorm.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"

namespace kformer {
namespace kk = kernels;

namespace {
DV<float***> btw(const DV<float**>& x, const BlockDims& d) {  // (N,W) read as (B,T,W)
  return as_tensor3(x.data(), d.B, d.T, x.extent(1));
}
DV<float**> first_rows(const DV<float**>& x, int rows) { return as_matrix(x.data(), rows, x.extent(1)); }
}  // namespace

void Block::forward_sp(const DV<float**>& x_in, BlockActs& a, BlockScratch& s) const {
  Exec exec;
  const DV<float*> none;
  const DV<float**> part = first_rows(s.d_tmp, d_.rows());  // this rank's rows of a reduce-scatter
  if (d_.gpt)
    kk::layernorm_forward(exec, a.f.ln1, a.mean1, a.rstd1, x_in, p_.v(name("ln1.weight")), p_.v(name("ln1.bias")));
  else
    kk::rmsnorm_forward(exec, a.f.ln1, a.rstd1, x_in, p_.v(name("attn_norm.weight")));
  comm::allgather(*tp_, a.f.ln1, s.gathered);
  kk::matmul_forward(exec, k_.gemm, a.f.qkv, s.gathered, p_.w(name("attn.wq.weight"), 3),
                     d_.gpt ? p_.v(name("attn.wq.bias"), 3) : none);
  if (!d_.gpt) kk::rope_forward(exec, btw(a.f.qkv, d_), btw(a.f.qkv, d_), d_.Hl + d_.KVl, d_.hd, 0);
  kk::attention_forward(exec, btw(a.f.att_out, d_), a.f.att, btw(a.f.qkv, d_), d_.Hl, d_.KVl);
  kk::matmul_forward(exec, k_.gemm, s.proj, a.f.att_out, p_.w(name("attn.wo.weight")),
                     d_.gpt && tp_root_ ? p_.v(name("attn.wo.bias")) : none);
  comm::reduce_scatter(*tp_, s.proj, part, comm::ReduceOp::sum);
  kk::residual_forward(exec, a.x_mid, x_in, part);

  if (d_.gpt)
    kk::layernorm_forward(exec, a.f.ln2, a.mean2, a.rstd2, a.x_mid, p_.v(name("ln2.weight")), p_.v(name("ln2.bias")));
  else
    kk::rmsnorm_forward(exec, a.f.ln2, a.rstd2, a.x_mid, p_.v(name("mlp_norm.weight")));
  comm::allgather(*tp_, a.f.ln2, s.gathered);
  if (d_.gpt) {
    kk::matmul_forward(exec, k_.gemm, a.f.mlp_in, s.gathered, p_.w(name("mlp.fc.weight")), p_.v(name("mlp.fc.bias")));
    kk::gelu_forward(exec, a.f.act, a.f.mlp_in);
    kk::matmul_forward(exec, k_.gemm, s.proj, a.f.act, p_.w(name("mlp.proj.weight")),
                       tp_root_ ? p_.v(name("mlp.proj.bias")) : none);
  } else {
    kk::matmul_forward(exec, k_.gemm, a.f.mlp_in, s.gathered, p_.w(name("mlp.gate.weight"), 2), none);
    kk::swiglu_forward(exec, a.f.act, a.f.mlp_in);
    kk::matmul_forward(exec, k_.gemm, s.proj, a.f.act, p_.w(name("mlp.down.weight")), none);
  }
  comm::reduce_scatter(*tp_, s.proj, part, comm::ReduceOp::sum);
  kk::residual_forward(exec, a.x_out, a.x_mid, part);
}

void Block::backward_sp(const DV<float**>& x_in, const BlockActs& a, BlockScratch& s, const DV<float**>& dx) const {
  Exec exec;
  const DV<float*> none;
  const int R = d_.rows();
  const DV<float**> d_part = first_rows(s.proj, R), d_norm = first_rows(s.d_tmp, R), d_mid = first_rows(s.d_mid, R);
  // The communicator orders its calls after the compute queued before them.
  const auto gather = [&](const DV<float**>& rows) { comm::allgather(*tp_, rows, s.gathered); };
  const auto scatter = [&](const DV<float**>& whole) { comm::reduce_scatter(*tp_, whole, d_part, comm::ReduceOp::sum); };
  // MLP: the gradient of x_out = x_mid + mlp(x_mid), this rank's rows of it in dx.
  gather(dx);
  const char* out = d_.gpt ? "mlp.proj.weight" : "mlp.down.weight";
  kk::matmul_backward(exec, k_.gemm, s.d_act, p_.dw(name(out)), d_.gpt ? p_.dv(name("mlp.proj.bias")) : none,
                      s.gathered, a.f.act, p_.w(name(out)));
  if (d_.gpt) kk::gelu_backward(exec, s.d_mlp_in, a.f.mlp_in, s.d_act);
  else kk::swiglu_backward(exec, s.d_mlp_in, a.f.mlp_in, s.d_act);
  gather(a.f.ln2);
  const char* in = d_.gpt ? "mlp.fc.weight" : "mlp.gate.weight";
  kk::matmul_backward(exec, k_.gemm, s.d_ln, p_.dw(name(in), d_.gpt ? 1 : 2), d_.gpt ? p_.dv(name("mlp.fc.bias")) : none,
                      s.d_mlp_in, s.gathered, p_.w(name(in), d_.gpt ? 1 : 2));
  scatter(s.d_ln);
  if (d_.gpt)
    kk::layernorm_backward(exec, d_norm, p_.dv(name("ln2.weight")), p_.dv(name("ln2.bias")), d_part, a.x_mid,
                           p_.v(name("ln2.weight")), a.mean2, a.rstd2);
  else
    kk::rmsnorm_backward(exec, d_norm, p_.dv(name("mlp_norm.weight")), d_part, a.x_mid, p_.v(name("mlp_norm.weight")),
                         a.rstd2);
  kk::residual_forward(exec, d_mid, dx, d_norm);

  // attention
  gather(d_mid);
  kk::matmul_backward(exec, k_.gemm, s.d_att_out, p_.dw(name("attn.wo.weight")),
                      d_.gpt ? p_.dv(name("attn.wo.bias")) : none, s.gathered, a.f.att_out, p_.w(name("attn.wo.weight")));
  kk::AttentionState<Exec> att = a.f.att;
  att.datt = s.att.datt;
  att.delta = s.att.delta;
  kk::attention_backward(exec, btw(s.d_qkv, d_), att, btw(s.d_att_out, d_), btw(a.f.qkv, d_), btw(a.f.att_out, d_), d_.Hl,
                         d_.KVl);
  if (!d_.gpt) kk::rope_backward(exec, btw(s.d_qkv, d_), btw(s.d_qkv, d_), d_.Hl + d_.KVl, d_.hd, 0);
  gather(a.f.ln1);
  kk::matmul_backward(exec, k_.gemm, s.d_ln, p_.dw(name("attn.wq.weight"), 3),
                      d_.gpt ? p_.dv(name("attn.wq.bias"), 3) : none, s.d_qkv, s.gathered,
                      p_.w(name("attn.wq.weight"), 3));
  scatter(s.d_ln);
  if (d_.gpt)
    kk::layernorm_backward(exec, d_norm, p_.dv(name("ln1.weight")), p_.dv(name("ln1.bias")), d_part, x_in,
                           p_.v(name("ln1.weight")), a.mean1, a.rstd1);
  else
    kk::rmsnorm_backward(exec, d_norm, p_.dv(name("attn_norm.weight")), d_part, x_in, p_.v(name("attn_norm.weight")),
                         a.rstd1);
  kk::residual_forward(exec, dx, d_mid, d_norm);
}

}  // namespace kformer
