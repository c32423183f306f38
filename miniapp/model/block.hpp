// One transformer block on one rank's tensor-parallel slice: GPT (LayerNorm, biases, GELU) or
// Llama (RMSNorm, RoPE, SwiGLU, GQA), forward and backward, with Megatron's two all-reduces per
// direction (after the row-parallel attention-out and MLP-out projections forward, after the
// column-parallel QKV and MLP-in projections backward). Shapes: N = B*T tokens, C = d_model,
// Hl, KVl the rank's query and kv heads, hd the head size, Fl the rank's MLP width.
#pragma once

#include <memory>

#include "attention.hpp"
#include "bf16.hpp"
#include "model/block_dims.hpp"
#include "comm/communicator.hpp"
#include "platform/device.hpp"
#include "gemm.hpp"
#include "model/model_spec.hpp"
#include "model/block_tensors.hpp"
#include "model/param_store.hpp"

namespace kformer {


// The activations a block keeps whose element type follows train.precision (T = float or bf16):
// the GEMMs' inputs and attention's. In bf16 the GEMMs still write fp32, rounded once into these.
template <class T>
struct TypedActs {
  DV<T**> ln1, ln2;                        // (R,C): R = N, or N/tp under sequence parallelism
  DV<T**> qkv;                             // (N, (Hl+2KVl)hd), after RoPE for llama
  DV<T**> att_out;                         // (N, Hl*hd)
  kernels::AttentionState<Exec, T> att;
  DV<T**> mlp_in, act;                     // (N, Fl or 2Fl), (N, Fl)
  DV<T**> qv, gate;  // train.recompute=op: Q and V side by side (N,(Hl+KVl)hd), the gate's output (N,Fl)
};

// What one block keeps from its forward for its backward (one micro-batch in flight). The
// residual stream (x_mid, x_out) and the norms' statistics stay fp32 in both precisions.
struct BlockActs {
  DV<float**> x_mid, x_out;               // (R,C)
  DV<float*> mean1, rstd1, mean2, rstd2;  // (R); means unused by RMSNorm
  TypedActs<float> f;                     // allocated in fp32
  TypedActs<kernels::bf16> h;             // allocated in bf16
  // scores = false (selective recompute): the naive attention's probabilities are not kept; the
  // allocated set's att.att is left empty for the stage to point at the buffer it recomputes them into.
  BlockActs(const BlockDims& d, kernels::AttentionKind kind, const kernels::AttentionState<Exec>& shared, bool bf16,
            bool scores = true);
  // train.recompute=op (recompute_op.cpp): a copy of the stage's shared set given what a block keeps of
  // its own: its output, attention output and state (probabilities or row statistics), qv and gate.
  void own_op_buffers(const BlockDims& d, bool bf16);
};

// Gradient buffers a backward reads as GEMM inputs, typed like TypedActs. In fp32 they alias
// BlockScratch's own; in bf16 dy and d_att_out hold rounded copies of fp32 gradients.
template <class T>
struct TypedScratch {
  DV<T**> d_qkv, d_mlp_in, dy, d_att_out;
  DV<T**> gathered;  // (N,C) sequence parallel: an all-gathered norm output (BlockScratch's in fp32)
};

// Buffers the backward of any block may reuse (one set per rank). In bf16 the forward also uses
// d_qkv and d_mlp_in as its fp32 GEMM outputs before they are rounded into the activations, and
// d_qkv, d_mlp_in, d_act and d_att_out are views of one fp32 buffer, `staging` (block.cpp says why).
struct BlockScratch {
  DV<float**> proj, d_mid, d_tmp, d_ln;  // (N,C)
  DV<float**> d_att_out, d_qkv, d_mlp_in, d_act;
  DV<float**> staging;                    // bf16 only: (N, max(qkv, mlp_in, Fl, q) width)
  DV<float**> gathered;                   // (N,C) sequence parallel: an all-gathered norm output or gradient
  kernels::AttentionState<Exec> att;      // the attention backward's scratch
  TypedScratch<float> f;
  TypedScratch<kernels::bf16> h;
  BlockScratch(const BlockDims& d, kernels::AttentionKind kind, bool bf16);
};

struct KernelChoice {
  kernels::GemmImpl gemm = kernels::GemmImpl::native;
  kernels::AttentionKind attention = kernels::AttentionKind::naive;
  bool bf16 = false;  // train.precision=bf16
};

class Block {
 public:
  Block(int layer, const BlockDims& dims, const ParamStore& params, comm::Communicator* tp, KernelChoice k);

  // x_in (N,C) -> a.x_out (N,C).
  void forward(const DV<float**>& x_in, BlockActs& a, BlockScratch& s) const;
  // dx (N,C): the gradient of a.x_out on entry, of x_in on return. Parameter gradients add up.
  void backward(const DV<float**>& x_in, const BlockActs& a, BlockScratch& s, const DV<float**>& dx) const;
  // The same split in two (block_split.cpp), for zb-h1: backward_input leaves dx as above and keeps in `a`
  // what backward_weight, run later, needs to add the projections' gradients (s: its bf16 rounding buffer).
  void backward_input(const DV<float**>& x_in, BlockActs& a, BlockScratch& s, const DV<float**>& dx) const;
  void backward_weight(const BlockActs& a, BlockScratch& s) const;
  // Selective recompute (recompute.cpp): refills the naive attention's probabilities from the kept qkv, as the
  // forward computed them (its output goes to s.d_att_out, or s.h.d_att_out in bf16, which the backward overwrites).
  void recompute_scores(BlockActs& a, BlockScratch& s) const;
  // train.recompute=op (recompute_op.cpp, llama blocks; torchtitan's selective op policy): after the
  // forward, which wrote into the stage's shared buffers, keep Q and V (packed QKV's outer blocks) and
  // the gate's output in a's own qv and gate (its attention output and state are its own already);
  // before the backward, re-run the rest of the forward from x_in into the shared buffers: the norms,
  // K (its rows of the packed weight) and its RoPE, the output projection (and its TP all-reduce), the
  // residual, up and SwiGLU, the same values as the forward's.
  void keep_for_recompute(BlockActs& a) const;
  void recompute_op(const DV<float**>& x_in, BlockActs& a, BlockScratch& s) const;
  // This block's tensor `t` in the store (invalid where the family has none).
  ParamRef tensor(BlockTensor t) const { return at(t); }

 private:
  template <class T>
  void forward_t(const DV<float**>& x_in, BlockActs& a, TypedActs<T>& t, BlockScratch& s) const;
  template <class T>
  void backward_t(const DV<float**>& x_in, const BlockActs& a, const TypedActs<T>& t, BlockScratch& s,
                  TypedScratch<T>& ts, const DV<float**>& dx) const;
  template <class T>
  void backward_input_t(const DV<float**>& x_in, BlockActs& a, TypedActs<T>& t, BlockScratch& s, TypedScratch<T>& ts,
                        const DV<float**>& dx) const;
  template <class T>
  void backward_weight_t(const BlockActs& a, const TypedActs<T>& t, BlockScratch& s, TypedScratch<T>& ts) const;
  template <class T>
  void keep_for_recompute_t(TypedActs<T>& t) const;
  template <class T>
  void recompute_op_t(const DV<float**>& x_in, BlockActs& a, TypedActs<T>& t, BlockScratch& s, TypedScratch<T>& ts) const;
  template <class T>
  DV<T**> W(BlockTensor t, int count = 1) const {  // a GEMM's weight in its precision
    return p_.wt<T>(at(t), count);
  }
  // Sequence parallelism (block_sp.cpp): x_in, dx and the norms' rows split over the TP ranks;
  // all-gather before the column-parallel projections, reduce-scatter after the row-parallel ones.
  // input_only (zb-h1's B): the projections' input halves only, for backward_input.
  template <class T>
  void forward_sp(const DV<float**>& x_in, BlockActs& a, TypedActs<T>& t, BlockScratch& s, TypedScratch<T>& ts) const;
  template <class T>
  void backward_sp(const DV<float**>& x_in, const BlockActs& a, const TypedActs<T>& t, BlockScratch& s,
                   TypedScratch<T>& ts, const DV<float**>& dx, bool input_only = false) const;
  // x summed over TP in place; what it carries, for predict (comm::Payload).
  void tp_allreduce(const DV<float**>& x, comm::Payload what) const;
  ParamRef at(BlockTensor t) const { return refs_[static_cast<std::size_t>(t)]; }

  std::array<ParamRef, static_cast<std::size_t>(BlockTensor::count)> refs_;  // found once, at construction
  BlockDims d_;
  const ParamStore& p_;
  comm::Communicator* tp_;
  KernelChoice k_;
  bool tp_root_;  // adds the replicated biases of row-parallel layers exactly once
};

}  // namespace kformer
