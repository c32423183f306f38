// A chunk's part in sequence parallelism (see stage.hpp and block_sp.cpp): the embedding's output
// reduce-scattered to this rank's rows, the final norm on those rows and gathered for the
// vocab-parallel head, the head's input gradient reduce-scattered back, the input gradient
// gathered whole for the embedding's backward, and the norms' weight gradients summed over TP
// (once per iteration, or per micro-batch before ZeRO-3 reduce-scatters a unit's gradients).
#include "comm/views.hpp"
#include "model/stage.hpp"

namespace kformer {

void Stage::tp_reduce_rows(const DV<float**>& whole, const DV<float**>& rows, comm::Payload what) const {
  if (d_.sp > 1) comm::reduce_scatter(*tp_, whole, rows, comm::ReduceOp::sum, comm::CallSite::carrying(what));
  else tp_allreduce(whole, comm::ReduceOp::sum, what);
}

DV<float**> Stage::whole_rows(const DV<float**>& rows) {
  if (d_.sp == 1) return rows;
  comm::allgather(*tp_, rows, scratch_.gathered, comm::CallSite::carrying(comm::Payload::activations));
  return scratch_.gathered;
}

void Stage::sum_norms_over_tp(int layer) const {
  if (d_.sp == 1) return;
  std::vector<ParamRef> norms;
  if (layer == s_.n_layers) {
    norms = {final_norm_w_, final_norm_b_};
  } else if (layer >= c_.first_layer && layer < c_.first_layer + c_.n_layers) {
    const Block& b = blocks_[std::size_t(layer - c_.first_layer)];
    for (BlockTensor t : {BlockTensor::ln1_w, BlockTensor::ln1_b, BlockTensor::ln2_w, BlockTensor::ln2_b,
                          BlockTensor::attn_norm, BlockTensor::mlp_norm})
      norms.push_back(b.tensor(t));  // gpt's layernorms or llama's rmsnorms: the others are not held
  }
  for (ParamRef r : norms)
    if (r.valid()) comm::allreduce(*tp_, p_.dv(r), comm::ReduceOp::sum);
}

void Stage::unit_done(int layer, const std::function<void(int)>& on_unit_done) {
  if (!p_.grads_buffered()) sum_norms_over_tp(layer);  // buffered: summed each micro-batch (grads_complete)
  on_unit_done(layer);
}

void Stage::grads_complete(int layer) const {
  if (!p_.grads_buffered()) return;
  sum_norms_over_tp(layer);
  p_.close_grads(layer);
}

}  // namespace kformer
