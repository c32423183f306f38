// One block's backward in two parts, for zb-h1 (see block.hpp): B, the input gradient (what the
// previous block and stage wait for), and W, the four projections' weight and bias gradients,
// which a schedule may run later. The kernels and their operands are those of Block::backward,
// so B then W gives the same numbers bit for bit. W needs each projection's input (kept in the
// activations) and output gradient: B leaves those in activation buffers it no longer reads
// (the MLP-out gradient in x_out, the MLP-in one in mlp_in, the attention-out one in x_mid, the
// QKV one in qkv), swapping View handles with the scratch, so deferring W costs no memory.
#include <utility>

#include "activations.hpp"
#include "block.hpp"
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
// dx(N, in) = dy(N, out) W(out, in): matmul_backward's input half, the same GEMM call.
void matmul_backward_input(kk::GemmImpl impl, const DV<float**>& dx, const DV<float**>& dy, const DV<float**>& w) {
  kk::gemm(Exec(), impl, kk::Op::N, kk::Op::N, 1.0f, DV<const float**>(dy), DV<const float**>(w), 0.0f, dx);
}
}  // namespace

void Block::backward_input(const DV<float**>& x_in, BlockActs& a, BlockScratch& s, const DV<float**>& dx) const {
  if (d_.sp > 1) return backward_sp(x_in, a, s, dx, &a);
  Exec exec;
  const DV<float*> none;
  Kokkos::deep_copy(exec, a.x_out, dx);  // the MLP-out projection's output gradient, for W
  if (d_.gpt) {
    matmul_backward_input(k_.gemm, s.d_act, dx, p_.w(name("mlp.proj.weight")));
    kk::gelu_backward(exec, s.d_mlp_in, a.f.mlp_in, s.d_act);
    matmul_backward_input(k_.gemm, s.d_ln, s.d_mlp_in, p_.w(name("mlp.fc.weight")));
    tp_allreduce(s.d_ln);
    kk::layernorm_backward(exec, s.d_tmp, p_.dv(name("ln2.weight")), p_.dv(name("ln2.bias")), s.d_ln, a.x_mid,
                           p_.v(name("ln2.weight")), a.mean2, a.rstd2);
  } else {
    matmul_backward_input(k_.gemm, s.d_act, dx, p_.w(name("mlp.down.weight")));
    kk::swiglu_backward(exec, s.d_mlp_in, a.f.mlp_in, s.d_act);
    matmul_backward_input(k_.gemm, s.d_ln, s.d_mlp_in, p_.w(name("mlp.gate.weight"), 2));
    tp_allreduce(s.d_ln);
    kk::rmsnorm_backward(exec, s.d_tmp, p_.dv(name("mlp_norm.weight")), s.d_ln, a.x_mid,
                         p_.v(name("mlp_norm.weight")), a.rstd2);
  }
  kk::residual_forward(exec, s.d_mid, dx, s.d_tmp);

  matmul_backward_input(k_.gemm, s.d_att_out, s.d_mid, p_.w(name("attn.wo.weight")));
  kk::AttentionState<Exec> att = a.f.att;
  att.datt = s.att.datt;
  att.delta = s.att.delta;
  kk::attention_backward(exec, btw(s.d_qkv, d_), att, btw(s.d_att_out, d_), btw(a.f.qkv, d_), btw(a.f.att_out, d_), d_.Hl,
                         d_.KVl);
  if (!d_.gpt) kk::rope_backward(exec, btw(s.d_qkv, d_), btw(s.d_qkv, d_), d_.Hl + d_.KVl, d_.hd, 0);
  matmul_backward_input(k_.gemm, s.d_ln, s.d_qkv, p_.w(name("attn.wq.weight"), 3));
  tp_allreduce(s.d_ln);
  if (d_.gpt)
    kk::layernorm_backward(exec, s.d_tmp, p_.dv(name("ln1.weight")), p_.dv(name("ln1.bias")), s.d_ln, x_in,
                           p_.v(name("ln1.weight")), a.mean1, a.rstd1);
  else
    kk::rmsnorm_backward(exec, s.d_tmp, p_.dv(name("attn_norm.weight")), s.d_ln, x_in,
                         p_.v(name("attn_norm.weight")), a.rstd1);
  kk::residual_forward(exec, dx, s.d_mid, s.d_tmp);
  // Keep the output gradients W needs where the activations B no longer reads were.
  std::swap(a.f.mlp_in, s.d_mlp_in);
  std::swap(a.x_mid, s.d_mid);
  std::swap(a.f.qkv, s.d_qkv);
  s.f.d_qkv = s.d_qkv;  // the fp32 aliases follow the swapped handles
  s.f.d_mlp_in = s.d_mlp_in;
}

void Block::backward_weight(const BlockActs& a, BlockScratch& s) const {
  if (d_.sp > 1) return backward_weight_sp(a, s);
  Exec exec;
  const DV<float*> none;
  const DV<float**> no_dx, no_w;  // the input half is skipped, so the weights are not read (nor gathered)
  const bool g = d_.gpt;
  const char* out = g ? "mlp.proj.weight" : "mlp.down.weight";
  const char* in = g ? "mlp.fc.weight" : "mlp.gate.weight";
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(name(out)), g ? p_.dv(name("mlp.proj.bias")) : none, a.x_out, a.f.act, no_w);
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(name(in), g ? 1 : 2), g ? p_.dv(name("mlp.fc.bias")) : none,
                      a.f.mlp_in, a.f.ln2, no_w);
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(name("attn.wo.weight")), g ? p_.dv(name("attn.wo.bias")) : none,
                      a.x_mid, a.f.att_out, no_w);
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(name("attn.wq.weight"), 3), g ? p_.dv(name("attn.wq.bias"), 3) : none,
                      a.f.qkv, a.f.ln1, no_w);
}

}  // namespace kformer
