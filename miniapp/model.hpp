// The whole model on one rank: embedding -> blocks -> final norm -> head -> loss, forward and
// backward for one micro-batch (B sequences of T tokens, N = B*T). Under tensor parallelism the
// embedding, head and loss are vocab-parallel (Megatron): each rank holds vocab_padded/tp rows.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "block.hpp"
#include "embedding.hpp"
#include "flops.hpp"

namespace kformer {

class Model {
 public:
  Model(const ModelShape& shape, int micro_batch, int seq_len, KernelChoice kernels, const ParamStore& params,
        comm::Communicator* tp);

  // tokens: host (B, T+1), inputs and shifted targets. Runs forward and backward; parameter
  // gradients are added to, scaled by grad_scale (1 / tokens in the global batch). Returns the
  // sum of the micro-batch's token losses (the same on every TP rank). on_unit_done(layer) is
  // called as each unit's gradients are complete for this micro-batch (L for the final norm
  // and head, then L-1 .. 0, then -1 for the embedding): the data-parallel bucket hook.
  double forward_backward(const std::vector<std::int32_t>& tokens, float grad_scale,
                          const std::function<void(int)>& on_unit_done = {});

  // Per micro-batch on this rank.
  Flops flops() const;
  const BlockDims& dims() const { return d_; }

  // Milliseconds of the last forward_backward, split (device work fenced at the boundary).
  double last_forward_ms = 0, last_backward_ms = 0;

 private:
  void forward(const std::vector<std::int32_t>& tokens);
  double loss_and_dlogits(float grad_scale);
  void backward(const std::function<void(int)>& on_unit_done);
  void tp_allreduce(const DV<float**>& x, comm::ReduceOp op = comm::ReduceOp::sum) const;
  DV<float**> head_weight() const;
  DV<float**> head_grad() const;

  ModelShape s_;
  BlockDims d_;
  KernelChoice k_;
  const ParamStore& p_;
  comm::Communicator* tp_;
  int tp_rank_ = 0, v0_ = 0, Vl_ = 0;

  std::vector<Block> blocks_;
  BlockScratch scratch_;
  std::vector<BlockActs> acts_;
  DV<std::int32_t*> inputs_, targets_;
  std::vector<std::int32_t> host_inputs_;
  DV<float**> emb_, lnf_, dx_, logits_, stats_;
  DV<float*> lnf_mean_, lnf_rstd_, lmax_, loss_;
};

}  // namespace kformer
