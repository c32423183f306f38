// One block under sequence parallelism (Megatron-LM's, with tensor parallelism; see block.hpp).
// A TP rank holds R = N/tp rows (tokens) of the block's input, its residual stream and its norms'
// outputs: rows [rank*R, (rank+1)*R) of the (N,C) matrices every rank held whole before. Before a
// column-parallel projection the norm's output is all-gathered (N,C); after a row-parallel one
// the partial sums are reduce-scattered to R rows instead of all-reduced. Backward mirrors it:
// the output gradient of a row-parallel projection is all-gathered, the input gradient of a
// column-parallel one reduce-scattered, and the gathered norm outputs the weight gradients need
// are gathered again rather than kept. Under zb-h1 B leaves the output gradients W needs in the
// activations (as block_split.cpp does) and W gathers what it needs again. The norms' weight gradients sum over this rank's rows
// only: the stage all-reduces them over TP once per iteration (Stage::reduce_sequence_parallel).
#include <utility>

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

void Block::backward_sp(const DV<float**>& x_in, const BlockActs& a, BlockScratch& s, const DV<float**>& dx,
                        BlockActs* keep) const {
  Exec exec;
  const DV<float*> none;
  const int R = d_.rows();
  const DV<float**> d_part = first_rows(s.proj, R), d_norm = first_rows(s.d_tmp, R), d_mid = first_rows(s.d_mid, R);
  // The communicator orders its calls after the compute queued before them.
  const auto gather = [&](const DV<float**>& rows) { comm::allgather(*tp_, rows, s.gathered); };
  const auto scatter = [&](const DV<float**>& whole) { comm::reduce_scatter(*tp_, whole, d_part, comm::ReduceOp::sum); };
  // A projection's backward: whole, or (keep: zb-h1's B) its input half, W adding the rest later.
  const auto project = [&](const DV<float**>& d_in, const char* w, int count, const DV<float*>& db,
                           const DV<float**>& dy, const DV<float**>& in) {
    if (keep)
      kk::gemm(exec, k_.gemm, kk::Op::N, kk::Op::N, 1.0f, DV<const float**>(dy), DV<const float**>(p_.w(name(w), count)),
               0.0f, d_in);
    else
      kk::matmul_backward(exec, k_.gemm, d_in, p_.dw(name(w), count), db, dy, in, p_.w(name(w), count));
  };
  if (keep) Kokkos::deep_copy(exec, keep->x_out, dx);  // W's MLP-out gradient rows
  // MLP: the gradient of x_out = x_mid + mlp(x_mid), this rank's rows of it in dx.
  gather(dx);
  project(s.d_act, d_.gpt ? "mlp.proj.weight" : "mlp.down.weight", 1, d_.gpt ? p_.dv(name("mlp.proj.bias")) : none,
          s.gathered, a.f.act);
  if (d_.gpt) kk::gelu_backward(exec, s.d_mlp_in, a.f.mlp_in, s.d_act);
  else kk::swiglu_backward(exec, s.d_mlp_in, a.f.mlp_in, s.d_act);
  if (!keep) gather(a.f.ln2);
  project(s.d_ln, d_.gpt ? "mlp.fc.weight" : "mlp.gate.weight", d_.gpt ? 1 : 2,
          d_.gpt ? p_.dv(name("mlp.fc.bias")) : none, s.d_mlp_in, s.gathered);
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
  project(s.d_att_out, "attn.wo.weight", 1, d_.gpt ? p_.dv(name("attn.wo.bias")) : none, s.gathered, a.f.att_out);
  kk::AttentionState<Exec> att = a.f.att;
  att.datt = s.att.datt;
  att.delta = s.att.delta;
  kk::attention_backward(exec, btw(s.d_qkv, d_), att, btw(s.d_att_out, d_), btw(a.f.qkv, d_), btw(a.f.att_out, d_), d_.Hl,
                         d_.KVl);
  if (!d_.gpt) kk::rope_backward(exec, btw(s.d_qkv, d_), btw(s.d_qkv, d_), d_.Hl + d_.KVl, d_.hd, 0);
  if (!keep) gather(a.f.ln1);
  project(s.d_ln, "attn.wq.weight", 3, d_.gpt ? p_.dv(name("attn.wq.bias"), 3) : none, s.d_qkv, s.gathered);
  scatter(s.d_ln);
  if (d_.gpt)
    kk::layernorm_backward(exec, d_norm, p_.dv(name("ln1.weight")), p_.dv(name("ln1.bias")), d_part, x_in,
                           p_.v(name("ln1.weight")), a.mean1, a.rstd1);
  else
    kk::rmsnorm_backward(exec, d_norm, p_.dv(name("attn_norm.weight")), d_part, x_in, p_.v(name("attn_norm.weight")),
                         a.rstd1);
  if (keep) Kokkos::deep_copy(exec, keep->x_mid, d_mid);  // W's attention-out gradient rows (x_mid is read no more)
  kk::residual_forward(exec, dx, d_mid, d_norm);
  if (keep) {  // as Block::backward_input does
    std::swap(keep->f.mlp_in, s.d_mlp_in);
    std::swap(keep->f.qkv, s.d_qkv);
    s.f.d_qkv = s.d_qkv;  // the fp32 aliases follow the swapped handles
    s.f.d_mlp_in = s.d_mlp_in;
  }
}

void Block::backward_weight_sp(const BlockActs& a, BlockScratch& s) const {
  Exec exec;
  const DV<float*> none;
  const DV<float**> no_dx, no_w;
  const bool g = d_.gpt;
  const auto gather = [&](const DV<float**>& rows) { comm::allgather(*tp_, rows, s.gathered); };
  gather(a.x_out);  // the MLP-out projection's output gradient, whole
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(name(g ? "mlp.proj.weight" : "mlp.down.weight")),
                      g ? p_.dv(name("mlp.proj.bias")) : none, s.gathered, a.f.act, no_w);
  gather(a.f.ln2);
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(name(g ? "mlp.fc.weight" : "mlp.gate.weight"), g ? 1 : 2),
                      g ? p_.dv(name("mlp.fc.bias")) : none, a.f.mlp_in, s.gathered, no_w);
  gather(a.x_mid);  // the attention-out projection's output gradient, whole
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(name("attn.wo.weight")), g ? p_.dv(name("attn.wo.bias")) : none,
                      s.gathered, a.f.att_out, no_w);
  gather(a.f.ln1);
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(name("attn.wq.weight"), 3), g ? p_.dv(name("attn.wq.bias"), 3) : none,
                      a.f.qkv, s.gathered, no_w);
}

}  // namespace kformer
