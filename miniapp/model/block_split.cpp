// One block's backward in two parts, for zb-h1 (see block.hpp): B, the input gradient (what the
// previous block and stage wait for), and W, the four projections' weight and bias gradients,
// which a schedule may run later. The kernels and their operands are those of Block::backward,
// so B then W gives the same numbers bit for bit, in fp32 and in bf16 (T: the activations' type,
// as Block::backward_t). W needs each projection's input (kept in the activations) and output
// gradient: B leaves those in activation buffers it no longer reads (the MLP-out gradient in
// x_out, the MLP-in one in mlp_in, the attention-out one in x_mid, the QKV one in qkv), swapping
// View handles with the scratch, so deferring W costs no memory. x_out and x_mid are fp32: in
// bf16, W rounds their gradients again as B did (into the scratch's dy), giving the same bits.
// Under sequence parallelism B is block_sp.cpp's backward without the weight halves; the two
// output gradients of the row-parallel projections are kept as this rank's rows (copied into
// x_out and x_mid, which hold R = N/tp rows), and W all-gathers them and the norms' outputs again,
// as the fused backward does: six all-gathers per block (two in B, four in W) against its four.
#include <type_traits>
#include <utility>

#include "activations.hpp"
#include "model/block.hpp"
#include "model/block_typed.hpp"
#include "layernorm.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"

namespace kformer {
namespace kk = kernels;
using block_typed::as_input;
using block_typed::btw;
using block_typed::first_rows;
using block_typed::matmul_backward_input;
using block_typed::whole_of;
using block_typed::with_backward_scratch;

void Block::backward_input(const DV<float**>& x_in, BlockActs& a, BlockScratch& s, const DV<float**>& dx) const {
  if (k_.bf16)
    backward_input_t(x_in, a, a.h, s, s.h, dx);
  else
    backward_input_t(x_in, a, a.f, s, s.f, dx);
}

void Block::backward_weight(const BlockActs& a, BlockScratch& s) const {
  if (k_.bf16)
    backward_weight_t(a, a.h, s, s.h);
  else
    backward_weight_t(a, a.f, s, s.f);
}

template <class T>
void Block::backward_input_t(const DV<float**>& x_in, BlockActs& a, TypedActs<T>& t, BlockScratch& s,
                             TypedScratch<T>& ts, const DV<float**>& dx) const {
  Exec exec;
  kk::copy(exec, a.x_out, dx);  // the MLP-out projection's output gradient, for W
  if (d_.sp > 1) {
    backward_sp(x_in, a, t, s, ts, dx, true);
    // The attention-out projection's output gradient (this rank's rows of s.d_mid): x_mid, R
    // rows, is read no more; the scratch holds N rows, so it is copied rather than swapped.
    kk::copy(exec, a.x_mid, first_rows(s.d_mid, d_.rows()));
  } else {
    if (d_.gpt) {
      matmul_backward_input(k_.gemm, s.d_act, as_input(exec, dx, ts.dy), W<T>(BlockTensor::proj));
      kk::gelu_backward(exec, ts.d_mlp_in, t.mlp_in, s.d_act);
      matmul_backward_input(k_.gemm, s.d_ln, ts.d_mlp_in, W<T>(BlockTensor::fc));
      tp_allreduce(s.d_ln, comm::Payload::input_gradient);
      kk::layernorm_backward(exec, s.d_tmp, p_.dv(at(BlockTensor::ln2_w)), p_.dv(at(BlockTensor::ln2_b)), s.d_ln, a.x_mid,
                             p_.v(at(BlockTensor::ln2_w)), a.mean2, a.rstd2);
    } else {
      matmul_backward_input(k_.gemm, s.d_act, as_input(exec, dx, ts.dy), W<T>(BlockTensor::down));
      kk::swiglu_backward(exec, ts.d_mlp_in, t.mlp_in, s.d_act);
      matmul_backward_input(k_.gemm, s.d_ln, ts.d_mlp_in, W<T>(BlockTensor::gate, 2));
      tp_allreduce(s.d_ln, comm::Payload::input_gradient);
      kk::rmsnorm_backward(exec, s.d_tmp, p_.dv(at(BlockTensor::mlp_norm)), s.d_ln, a.x_mid,
                           p_.v(at(BlockTensor::mlp_norm)), a.rstd2);
    }
    kk::residual_forward(exec, s.d_mid, dx, s.d_tmp, true);

    matmul_backward_input(k_.gemm, s.d_att_out, as_input(exec, s.d_mid, ts.dy), W<T>(BlockTensor::wo));
    kk::AttentionState<Exec, T> att = with_backward_scratch(t.att, s.att);
    kk::attention_backward(exec, btw(ts.d_qkv, d_), att, btw(as_input(exec, s.d_att_out, ts.d_att_out), d_),
                           btw(t.qkv, d_), btw(t.att_out, d_), d_.Hl, d_.KVl);
    if (!d_.gpt) kk::rope_backward(exec, btw(ts.d_qkv, d_), btw(ts.d_qkv, d_), d_.Hl + d_.KVl, d_.hd, 0);
    matmul_backward_input(k_.gemm, s.d_ln, ts.d_qkv, W<T>(BlockTensor::wq, 3));
    tp_allreduce(s.d_ln, comm::Payload::input_gradient);
    if (d_.gpt)
      kk::layernorm_backward(exec, s.d_tmp, p_.dv(at(BlockTensor::ln1_w)), p_.dv(at(BlockTensor::ln1_b)), s.d_ln, x_in,
                             p_.v(at(BlockTensor::ln1_w)), a.mean1, a.rstd1);
    else
      kk::rmsnorm_backward(exec, s.d_tmp, p_.dv(at(BlockTensor::attn_norm)), s.d_ln, x_in,
                           p_.v(at(BlockTensor::attn_norm)), a.rstd1);
    kk::residual_forward(exec, dx, s.d_mid, s.d_tmp, true);
    std::swap(a.x_mid, s.d_mid);
  }
  // Keep the output gradients W needs where the activations B no longer reads were.
  std::swap(t.mlp_in, ts.d_mlp_in);
  std::swap(t.qkv, ts.d_qkv);
  if constexpr (std::is_same<T, float>::value) {  // fp32: the scratch's own handles follow the swapped aliases
    s.d_qkv = ts.d_qkv;
    s.d_mlp_in = ts.d_mlp_in;
  }
}

template <class T>
void Block::backward_weight_t(const BlockActs& a, const TypedActs<T>& t, BlockScratch& s, TypedScratch<T>& ts) const {
  Exec exec;
  const DV<float*> none;
  const DV<float**> no_dx;  // the input half is skipped, so the weights are not read (nor gathered)
  const DV<T**> no_w;
  const bool g = d_.gpt;
  // The operands, whole (N rows): the kept output gradients (fp32, read as T) and norm outputs,
  // all-gathered from this rank's rows under sequence parallelism, in block_sp.cpp's order.
  const auto grad = [&](const DV<float**>& kept) { return as_input(exec, whole_of(tp_, d_.sp, kept, s.gathered, comm::CallSite::carrying(comm::Payload::activations)), ts.dy); };
  const auto norm = [&](const DV<T**>& kept) { return whole_of(tp_, d_.sp, kept, ts.gathered, comm::CallSite::carrying(comm::Payload::weight_input)); };
  const BlockTensor out = g ? BlockTensor::proj : BlockTensor::down, in = g ? BlockTensor::fc : BlockTensor::gate;
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(at(out)), g ? p_.dv(at(BlockTensor::proj_b)) : none, grad(a.x_out),
                      t.act, no_w);
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(at(in), g ? 1 : 2), g ? p_.dv(at(BlockTensor::fc_b)) : none,
                      t.mlp_in, norm(t.ln2), no_w);
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(at(BlockTensor::wo)), g ? p_.dv(at(BlockTensor::wo_b)) : none,
                      grad(a.x_mid), t.att_out, no_w);
  kk::matmul_backward(exec, k_.gemm, no_dx, p_.dw(at(BlockTensor::wq), 3), g ? p_.dv(at(BlockTensor::wq_b), 3) : none,
                      t.qkv, norm(t.ln1), no_w);
}

}  // namespace kformer
