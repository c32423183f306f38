// One model chunk on one rank: the embedding (first chunk), blocks [first_layer, first_layer +
// n_layers), and the final norm, head and loss (last chunk); with one chunk it is the whole model.
// Forward and backward run per micro-batch, each with its own activations (a slot), so that a
// pipeline schedule can keep several micro-batches in flight. Shapes: N = B*T tokens, C = d_model;
// under tensor parallelism the embedding, head and loss are vocab-parallel (vocab_padded/tp rows).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "model/block.hpp"
#include "model/block_typed.hpp"
#include "embedding.hpp"
#include "comm/views.hpp"
#include "model/flops.hpp"
#include "model/recompute.hpp"

namespace kformer {

struct ChunkSpec {
  int chunk = 0, n_chunks = 1;        // this chunk's index among all of the model's
  int first_layer = 0, n_layers = 0;  // its blocks
  bool first() const { return chunk == 0; }
  bool last() const { return chunk == n_chunks - 1; }
};

class Stage {
 public:
  Stage(const ModelShape& shape, int micro_batch, int seq_len, KernelChoice kernels, const ParamStore& params,
        comm::Communicator* tp, ChunkSpec chunk);

  const ChunkSpec& chunk() const { return c_; }
  const BlockDims& dims() const { return d_; }

  // The buffer the previous chunk's activation (N,C) is received into; takes a slot for `micro`.
  DV<float**> input(int micro);
  // tokens (B, T+1) host: read by the first chunk (inputs) and the last (targets). The last chunk
  // also computes the loss and runs the head's backward here, so logits never outlive the call;
  // that part is timed as backward (backward_ms), and head_backward_start_us says where it began.
  void forward(int micro, const std::vector<std::int32_t>& tokens, float grad_scale);
  double head_backward_start_us = -1;  // of the last forward call (TraceLog clock); -1: not the last chunk
  DV<float**> output(int micro) const;       // (N,C) for the next chunk
  DV<float**> output_grad(int micro) const;  // the buffer its gradient is received into
  // on_unit_done(layer): the unit's gradients are complete (hook for data-parallel buckets).
  void backward(int micro, const std::function<void(int)>& on_unit_done);
  // zb-h1 (stage_split.cpp): the backward in two, B then, later, W of the same micro-batch. B
  // leaves input_grad(micro) ready to send; W adds the weight gradients (the embedding's
  // included) and fires on_unit_done. The slot stays taken until W has run.
  void backward_input(int micro);
  void backward_weight(int micro, const std::function<void(int)>& on_unit_done);
  DV<float**> input_grad(int micro) const;  // (N,C) for the previous chunk
  // The pipeline's message of `micro` between this chunk and `peer`: forward, the activation
  // (sent to the next chunk, or received from the previous one, which takes a slot as input()
  // does); backward, its gradient. In bf16 they travel as bf16 copies of the fp32 buffers above,
  // rounded after the compute that writes them and widened before the compute that reads them.
  comm::Op message(bool forward, bool send, int micro, int peer);
  void release(int micro);                  // the slot may be reused

  // train.recompute (recompute.cpp); set before the first micro-batch. Under full, the chunk's
  // first `full_blocks` blocks re-run their forward (train.recompute_layers) and the rest keep
  // everything, as under none.
  void set_recompute(Recompute r, int full_blocks);
  // zb-h1: W runs apart from B (the first chunk's W reads its dx); set before the first micro-batch.
  void set_split_backward(bool on) { split_backward_ = on; }
  // output.phase_timing: fence after each forward and backward call, so that forward_ms and
  // backward_ms are the device's time on a GPU (off: no fence inside a step; on the host the
  // kernels have finished when a call returns, so the times are the same either way).
  void set_phase_timing(bool on) { phase_timing_ = on; }
  // The last chunk adds the sum of its micro-batches' token losses (double) into sums(0), on the
  // device (sums(1) is its scratch); the trainer zeroes them each iteration and reads them once.
  void set_loss_sums(const DV<double*>& sums) { loss_sums_ = sums; }
  // Bytes of activations held now: the slots' and the recomputation's buffers (measured from the
  // Views, each allocation once).
  std::int64_t activation_bytes() const;

  double forward_ms = 0, backward_ms = 0;   // accumulated; the trainer resets them
  Flops flops() const;                      // per micro-batch
  std::size_t slots_allocated() const { return slots_.size(); }

 private:
  // In bf16 a slot keeps what Megatron-LM keeps of a micro-batch between its forward and its
  // backward (Slot memory): the input as received, in bf16 (in16), widened where it is read into
  // x_in, one buffer of the chunk's; the output and the gradient as they travel (out16, grad16:
  // this rank's part where messages are split over TP, the gradient's parts all-gathered into one
  // bf16 buffer of the chunk's); dx is one buffer of the chunk's too where it lives within one
  // backward call (not in the last chunk, whose forward call's head backward makes it, nor in the
  // first under zb-h1, whose W reads it), and under full recomputation so is the last block's
  // output (the next chunk gets out16). The first chunk keeps its fp32 input (the embedding's
  // sum). fp32 slots send and receive their fp32 buffers: all of them their own.
  struct Slot {
    std::vector<BlockActs> acts;
    DV<float**> x_in, dx;  // the chunk's input and the gradient flowing back through it
    DV<kernels::bf16**> in16, out16, grad16;  // bf16: the input as received, the output and dx as they travel
    // First and last chunk: the micro-batch's tokens, packed to travel in one copy: inputs (N),
    // targets (N), the embedding backward's token index (token_index_capacity(N)); and the host
    // buffer they are assembled in (the same memory when the device is the host).
    DV<std::int32_t*> tokens;
    DV<std::int32_t*>::HostMirror tokens_host;
    kernels::TokenIndex<Exec> index;
    bool busy = false;
  };
  Slot& slot(int micro);
  const Slot& slot(int micro) const;
  BlockActs make_acts(int block);               // one block's activations in a new slot
  // bf16 slot memory (Slot): which buffers are the chunk's, shared by its slots.
  bool shares_input() const { return k_.bf16 && !c_.first(); }
  bool shares_dx() const { return k_.bf16 && !c_.last() && !(c_.first() && split_backward_); }
  bool shares_last_output() const { return k_.bf16 && mode_of(c_.n_layers - 1) == Recompute::full; }
  Recompute mode_of(int block) const;          // what block's backward gets: recompute_ or none
  void widen_input(Slot& s);  // shares_input(): x_in from in16 (before the forward and the backward)
  BlockActs& for_backward(int i, Slot& s);     // block i's activations, recomputed as the mode says
  DV<const std::int32_t*> inputs(const Slot& s) const;   // (N) of the packed tokens
  DV<const std::int32_t*> targets(const Slot& s) const;  // (N)
  void head_forward(Slot& s);
  void head_backward(Slot& s, float grad_scale);
  // The vocabulary split over TP: the loss in three passes with the group's reductions between them;
  // otherwise one pass over whole rows (kernels/loss_optim/cross_entropy.hpp).
  bool vocab_split() const { return tp_ && tp_->size() > 1; }
  DV<float**> x_last(const Slot& s) const;
  void receive_grad(Slot& s);  // a non-last chunk's output gradient, as received, into s.dx
  void tp_allreduce(const DV<float**>& x, comm::ReduceOp op = comm::ReduceOp::sum,
                    comm::Payload what = comm::Payload::other) const;
  // Sequence parallelism (stage_sp.cpp). whole (N,C) summed over TP into rows: this rank's R rows
  // (reduce-scatter), or in place (all-reduce, rows == whole) without it; `what` it carries.
  void tp_reduce_rows(const DV<float**>& whole, const DV<float**>& rows, comm::Payload what) const;
  template <class T>  // this rank's R rows of whole (N,C) (gathered in place), or whole without sequence parallelism
  DV<T**> own_rows(const DV<T**>& whole) const {
    if (d_.sp == 1) return whole;
    const std::int64_t R = d_.rows(), C = whole.extent(1);
    return block_typed::Unmanaged2<T>(whole.data() + tp_rank_ * R * C, R, C);
  }
  DV<float**> whole_rows(const DV<float**>& rows);     // (N,C): rows all-gathered, or rows themselves
  // A pipeline message's part of `whole` on this rank: its 1/tp of the rows where the messages are
  // split over TP (BlockDims::splits_messages), else all of it; after a receive, gather_message
  // all-gathers the parts over TP in place.
  template <class T>
  DV<T**> message_part(const DV<T**>& whole) const {
    if (!d_.splits_messages()) return whole;
    const std::int64_t rows = d_.message_rows(), C = whole.extent(1);
    return block_typed::Unmanaged2<T>(whole.data() + tp_rank_ * rows * C, rows, C);
  }
  template <class T>
  void gather_message(const DV<T**>& whole) const;
  // Calls on_unit_done(layer), after summing the unit's norm gradients over TP under sequence
  // parallelism (each rank added its rows' part; when the store buffers the gradients per unit,
  // ParamStore::grads_buffered, grads_complete did so each micro-batch); it runs once per
  // iteration, on the last micro-batch.
  void unit_done(int layer, const std::function<void(int)>& on_unit_done);
  // When the store buffers the gradients per unit (ZeRO-3's shards, a bf16 gradient buffer): a
  // unit's gradients of one micro-batch are complete (its backward opened them with
  // ParamStore::open_grads); the norms' TP sum is taken here instead, then the store
  // reduce-scatters them or adds them into the bf16 gradient (close_grads). Nothing otherwise.
  void grads_complete(int layer) const;
  void sum_norms_over_tp(int layer) const;  // sequence parallelism: the unit's norm gradients

  ModelShape s_;
  BlockDims d_;
  KernelChoice k_;
  const ParamStore& p_;
  // The embedding's, final norm's and head's tensors in the store (invalid where this chunk has
  // none), found once at construction.
  ParamRef tokens_, positions_, final_norm_w_, final_norm_b_, head_;
  comm::Communicator* tp_;
  ChunkSpec c_;
  int tp_rank_ = 0, v0_ = 0, Vl_ = 0;
  std::vector<Block> blocks_;
  BlockScratch scratch_;
  std::vector<Slot> slots_;
  std::map<int, std::size_t> slot_of_;
  DV<float**> shared_x_in_, shared_dx_, shared_out_;  // bf16: the chunk's buffers its slots share (Slot)
  DV<kernels::bf16**> gathered_grad16_;                // bf16, split messages: the received gradient, whole
  bool split_backward_ = false;
  DV<float**> lnf_, logits_, stats_;
  DV<kernels::bf16**> lnf16_, dlogits16_;  // bf16: the head GEMM's inputs (lnf_ is then unused)
  DV<float*> lnf_mean_, lnf_rstd_, lmax_, loss_;
  DV<double*> loss_sums_;  // the trainer's (set_loss_sums), else the last chunk's own, made at its first loss
  bool phase_timing_ = false;
  Recompute recompute_ = Recompute::none;
  int full_blocks_ = 0;              // full: how many of the chunk's blocks (the first) re-run
  std::unique_ptr<BlockActs> work_;  // full: the buffers every block's forward shares
  DV<float****> scores_;             // selective, naive attention: the probabilities, recomputed
  DV<kernels::bf16****> scores16_;   // the same in bf16
};

}  // namespace kformer
