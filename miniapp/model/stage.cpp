// One model chunk on one rank (see stage.hpp).
#include "model/stage.hpp"

#include <Kokkos_Timer.hpp>

#include <optional>

#include "call_record.hpp"
#include "comm/trace_log.hpp"
#include "comm/views.hpp"
#include "convert.hpp"
#include "cross_entropy.hpp"
#include "embedding.hpp"
#include "layernorm.hpp"
#include "platform/profiling_region.hpp"
#include "rmsnorm.hpp"

namespace kformer {
namespace kk = kernels;

Stage::Stage(const ModelShape& shape, int micro_batch, int seq_len, KernelChoice kernels, const ParamStore& params,
             comm::Communicator* tp, ChunkSpec chunk)
    : s_(shape), d_(block_dims(shape, micro_batch, seq_len)), k_(kernels), p_(params), tp_(tp), c_(chunk),
      tp_rank_(tp ? tp->rank() : 0), scratch_(d_, kernels.attention, kernels.bf16) {
  Vl_ = s_.vocab_padded / s_.tp;
  v0_ = tp_rank_ * Vl_;
  tokens_ = p_.find("embed.tokens.weight");
  positions_ = p_.find("embed.positions.weight");
  final_norm_w_ = p_.find("final_norm.weight");
  final_norm_b_ = p_.find("final_norm.bias");
  head_ = s_.gpt ? tokens_ : p_.find("head.weight");  // gpt's head is the tied table
  const int N = d_.N();
  for (int l = c_.first_layer; l < c_.first_layer + c_.n_layers; ++l) blocks_.emplace_back(l, d_, params, tp, kernels);
  if (c_.last()) {
    if (k_.bf16) {
      lnf16_ = scratch<kk::bf16**>("lnf_bf16", N, d_.C);
      dlogits16_ = scratch<kk::bf16**>("dlogits_bf16", N, Vl_);
    } else {
      lnf_ = scratch_view("lnf", N, d_.C);
    }
    logits_ = scratch_view("logits", N, Vl_);
    stats_ = scratch_view("xent_stats", 2, N);
    lnf_mean_ = scratch<float*>("lnf_mean", d_.rows());
    lnf_rstd_ = scratch<float*>("lnf_rstd", d_.rows());
    lmax_ = scratch<float*>("xent_max", N);
    loss_ = scratch<float*>("loss", N);
  }
}

void Stage::tp_allreduce(const DV<float**>& x, comm::ReduceOp op, comm::Payload what) const {
  if (tp_ && tp_->size() > 1) comm::allreduce(*tp_, x, op, comm::CallSite::carrying(what));
}

Stage::Slot& Stage::slot(int micro) { return slots_[slot_of_.at(micro)]; }
const Stage::Slot& Stage::slot(int micro) const { return slots_[slot_of_.at(micro)]; }

DV<float**> Stage::input(int micro) {
  std::size_t i = 0;
  while (i < slots_.size() && slots_[i].busy) ++i;
  if (i == slots_.size()) {  // a new micro-batch in flight: its activations are allocated once, then reused
    std::optional<MemoryKindScope> kind(MemoryKind::activations);
    const auto shared = [&](DV<float**>& buf, const char* name) {  // the chunk's one buffer (Slot)
      if (!buf.data()) buf = scratch_view(name, d_.rows(), d_.C);
      return buf;
    };
    Slot s;
    for (int l = 0; l < c_.n_layers; ++l) s.acts.push_back(make_acts(l));
    s.x_in = shares_input() ? shared(shared_x_in_, "x_in") : scratch_view("x_in", d_.rows(), d_.C);
    s.dx = shares_dx() ? shared(shared_dx_, "dx") : scratch_view("dx", d_.rows(), d_.C);
    // What travels is this rank's part of the rows (message_rows); the input is kept whole.
    if (k_.bf16 && !c_.first()) s.in16 = scratch<kk::bf16**>("in_bf16", d_.rows(), d_.C);
    if (k_.bf16 && !c_.last()) s.out16 = scratch<kk::bf16**>("out_bf16", d_.message_rows(), d_.C);
    if (k_.bf16 && !(c_.first() && c_.last())) s.grad16 = scratch<kk::bf16**>("grad_bf16", d_.message_rows(), d_.C);
    if (k_.bf16 && !c_.last() && d_.splits_messages() && !gathered_grad16_.data())
      gathered_grad16_ = scratch<kk::bf16**>("grad_bf16_gathered", d_.rows(), d_.C);
    kind.emplace(MemoryKind::workspace);  // the tokens are the data's
    if (c_.first() || c_.last()) {
      const std::size_t N = std::size_t(d_.N());
      s.tokens = scratch<std::int32_t*>("tokens", 2 * N + kk::token_index_capacity(N));
      s.tokens_host = Kokkos::create_mirror_view(s.tokens);
    }
    slots_.push_back(std::move(s));
  }
  slots_[i].busy = true;
  slot_of_[micro] = i;
  return slots_[i].x_in;
}

void Stage::release(int micro) {
  slot(micro).busy = false;
  slot_of_.erase(micro);
}

void Stage::widen_input(Slot& s) {
  if (shares_input()) kk::convert(Exec(), s.x_in, s.in16);
}

void Stage::receive_grad(Slot& s) {
  if (c_.last()) return;  // the head's backward made it
  if (k_.bf16) {  // received in bf16: this rank's part, all-gathered over TP where split
    if (d_.splits_messages()) comm::allgather(*tp_, s.grad16, gathered_grad16_, comm::CallSite::carrying(comm::Payload::message));
    kk::convert(Exec(), s.dx, d_.splits_messages() ? gathered_grad16_ : s.grad16);
  } else {
    gather_message(s.dx);
  }
}

DV<float**> Stage::x_last(const Slot& s) const { return c_.n_layers ? s.acts.back().x_out : s.x_in; }
DV<float**> Stage::output(int micro) const { return x_last(slot(micro)); }
DV<float**> Stage::output_grad(int micro) const { return slot(micro).dx; }
DV<float**> Stage::input_grad(int micro) const { return slot(micro).dx; }

comm::Op Stage::message(bool forward, bool send, int micro, int peer) {
  if (!send && forward) input(micro);  // the receive takes the slot
  if (!k_.bf16) {
    const DV<float**> buf = message_part(forward ? (send ? output(micro) : slot(micro).x_in) : slot(micro).dx);
    return send ? comm::send_op(buf, peer) : comm::recv_op(buf, peer);
  }
  // out16 and grad16 hold this rank's part already; the input is received into its part of in16.
  const DV<kk::bf16**> buf = forward ? (send ? slot(micro).out16 : message_part(slot(micro).in16)) : slot(micro).grad16;
  return send ? comm::send_op(buf, peer) : comm::recv_op(buf, peer);
}

template <class T>
void Stage::gather_message(const DV<T**>& whole) const {
  if (d_.splits_messages()) comm::allgather(*tp_, message_part(whole), whole, comm::CallSite::carrying(comm::Payload::message));
}
template void Stage::gather_message(const DV<float**>&) const;
template void Stage::gather_message(const DV<kk::bf16**>&) const;

DV<const std::int32_t*> Stage::inputs(const Slot& s) const {
  return Kokkos::subview(s.tokens, std::make_pair(std::size_t(0), std::size_t(d_.N())));
}
DV<const std::int32_t*> Stage::targets(const Slot& s) const {
  return Kokkos::subview(s.tokens, std::make_pair(std::size_t(d_.N()), 2 * std::size_t(d_.N())));
}

void Stage::forward(int micro, const std::vector<std::int32_t>& tokens, float grad_scale) {
  Kokkos::Timer timer;
  Exec exec;
  Slot& s = slot(micro);
  const int B = d_.B, T = d_.T;
  const std::size_t N = std::size_t(B) * T;
  {
    const ProfilingRegion region("kformer::forward");
    if ((c_.first() || c_.last()) && !kk::described()) {  // host work (and described views hold no memory)
      // Inputs, targets and (first chunk) the embedding backward's token index, uploaded in one copy.
      std::int32_t* h = s.tokens_host.data();
      for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) {
          h[b * T + t] = tokens[std::size_t(b) * (T + 1) + t];
          h[N + b * T + t] = tokens[std::size_t(b) * (T + 1) + t + 1];
        }
      const auto index_part = Kokkos::subview(s.tokens, std::make_pair(2 * N, s.tokens.extent(0)));
      if (c_.first()) s.index = kk::make_token_index<Exec>(h, N, v0_, Vl_, h + 2 * N, index_part);
    }
    if (c_.first() || c_.last()) kk::copy(exec, s.tokens, s.tokens_host);
    if (c_.first()) {
      p_.require(-1);
      // The position table is replicated: one TP rank adds it, so the all-reduce counts it once.
      const bool positions = s_.gpt && tp_rank_ == 0;
      const DV<float**> embedded = d_.sp > 1 ? scratch_.gathered : s.x_in;  // (N,C), summed over TP to x_in
      if (p_.matrices_bf16_only())  // the tables are held in bf16 only
        kk::embedding_forward(exec, embedded, inputs(s), p_.w16(tokens_), v0_,
                              positions ? p_.w16(positions_) : DV<kk::bf16**>(), T);
      else
        kk::embedding_forward(exec, embedded, inputs(s), p_.w(tokens_), v0_,
                              positions ? p_.w(positions_) : DV<float**>(), T);
      tp_reduce_rows(embedded, s.x_in, comm::Payload::activations);
    } else if (k_.bf16) {
      gather_message(s.in16);
      widen_input(s);  // received in bf16
    } else {
      gather_message(s.x_in);
    }
    for (int i = 0; i < c_.n_layers; ++i) {
      p_.require(c_.first_layer + i);
      blocks_[i].forward(i ? s.acts[i - 1].x_out : s.x_in, s.acts[i], scratch_);
      if (mode_of(i) == Recompute::op) blocks_[i].keep_for_recompute(s.acts[i]);
    }
    if (c_.last())
      head_forward(s);
    else if (k_.bf16)
      kk::convert(exec, s.out16, message_part(x_last(s)));  // sent in bf16
    if (phase_timing_) kk::fence(exec, "kformer::forward_timing");
  }
  forward_ms += timer.seconds() * 1e3;
  head_backward_start_us = -1;
  if (c_.last()) {
    // The loss gradient and the head's backward run now, so that the logits (N, V/tp: the largest
    // activation) never outlive this call; they are backward work, and counted as such.
    const ProfilingRegion region("kformer::head_backward");
    head_backward_start_us = comm::TraceLog::now_us();
    Kokkos::Timer back;
    p_.open_grads(s_.n_layers);
    if (s_.gpt) p_.open_grads(-1);  // the tied table; on a one-stage model it stays open until its backward
    head_backward(s, grad_scale);
    grads_complete(s_.n_layers);
    if (s_.gpt && !c_.first()) grads_complete(-1);
    if (phase_timing_) kk::fence(exec, "kformer::backward_timing");
    backward_ms += back.seconds() * 1e3;
  }
}

// Final norm, vocab-parallel head and, with the vocabulary split, the cross-entropy's row maxima and
// sums: the logits and what the loss needs.
void Stage::head_forward(Slot& s) {
  Exec exec;
  const int L = s_.n_layers;
  p_.require(L);
  if (s_.gpt) p_.require(-1);  // gpt's head is the embedding table
  const DV<float**> x = x_last(s);
  // The final norm into whole (N,C), fp32 or bf16, from the fp32 residual stream: this rank's rows
  // of it, all-gathered under sequence parallelism.
  const auto final_norm = [&](const auto& whole) {
    const auto out = own_rows(whole);
    if (s_.gpt)
      kk::layernorm_forward(exec, out, lnf_mean_, lnf_rstd_, x, p_.v(final_norm_w_), p_.v(final_norm_b_));
    else
      kk::rmsnorm_forward(exec, out, lnf_rstd_, x, p_.v(final_norm_w_));
    if (d_.sp > 1) comm::allgather(*tp_, out, whole, comm::CallSite::carrying(comm::Payload::activations));
  };
  if (k_.bf16) {
    final_norm(lnf16_);
    kk::matmul_forward(exec, k_.gemm, logits_, lnf16_, p_.w16(head_));
  } else {
    final_norm(lnf_);
    kk::matmul_forward(exec, k_.gemm, logits_, lnf_, p_.w(head_));
  }

  if (!vocab_split()) return;  // the loss's one pass over whole rows runs in head_backward
  kk::xent_local_max(exec, lmax_, logits_, v0_, s_.vocab);
  comm::allreduce(*tp_, lmax_, comm::ReduceOp::max);
  kk::xent_local_sums(exec, stats_, logits_, targets(s), lmax_, v0_, s_.vocab);
  tp_allreduce(stats_);
}

// The loss and its gradient (one pass over the logits), then back through the head and the
// final norm: what the blocks' backward needs is the gradient of the last block's output (N,C).
void Stage::head_backward(Slot& s, float grad_scale) {
  Exec exec;
  const DV<float**> x = x_last(s);
  // The loss's last pass (the whole loss where one rank holds the vocabulary), writing the logits'
  // gradient over them, or rounded into their bf16 copy.
  const auto loss = [&](const auto& dlogits) {
    if (vocab_split())
      kk::xent_finish(exec, loss_, dlogits, logits_, targets(s), lmax_, stats_, v0_, s_.vocab, grad_scale);
    else
      kk::xent_whole_rows(exec, loss_, dlogits, logits_, targets(s), s_.vocab, grad_scale);
  };
  if (k_.bf16) {  // the loss in fp32, the gradient of the logits rounded for the head's GEMMs
    loss(dlogits16_);
    kk::matmul_backward(exec, k_.gemm, scratch_.d_ln, p_.dw(head_), DV<float*>(), dlogits16_, lnf16_, p_.w16(head_));
  } else {
    loss(logits_);
    kk::matmul_backward(exec, k_.gemm, scratch_.d_ln, p_.dw(head_), DV<float*>(), logits_, lnf_, p_.w(head_));
  }
  if (!loss_sums_.data()) loss_sums_ = scratch<double*>("loss_sums", 2);  // the trainer hands its own (set_loss_sums)
  kk::xent_loss_accumulate(exec, loss_sums_, DV<const float*>(loss_));
  const DV<float**> d_lnf = d_.sp > 1 ? as_matrix(scratch_.proj.data(), d_.rows(), d_.C) : scratch_.d_ln;
  tp_reduce_rows(scratch_.d_ln, d_lnf, comm::Payload::input_gradient);
  if (s_.gpt)
    kk::layernorm_backward(exec, s.dx, p_.dv(final_norm_w_), p_.dv(final_norm_b_), d_lnf, x,
                           p_.v(final_norm_w_), lnf_mean_, lnf_rstd_);
  else
    kk::rmsnorm_backward(exec, s.dx, p_.dv(final_norm_w_), d_lnf, x, p_.v(final_norm_w_), lnf_rstd_);
}

void Stage::backward(int micro, const std::function<void(int)>& on_unit_done) {
  const ProfilingRegion region("kformer::backward");
  Kokkos::Timer timer;
  Exec exec;
  Slot& s = slot(micro);
  if (c_.last() && on_unit_done) {
    unit_done(s_.n_layers, on_unit_done);            // final norm and head: done after the forward
    if (!c_.first() && s_.gpt) on_unit_done(-1);     // this stage's copy of the tied table
  }
  receive_grad(s);
  widen_input(s);  // x_in is the chunk's: other micro-batches' forwards used it since
  for (int i = c_.n_layers - 1; i >= 0; --i) {
    p_.require(c_.first_layer + i);
    p_.open_grads(c_.first_layer + i);
    blocks_[i].backward(i ? s.acts[i - 1].x_out : s.x_in, for_backward(i, s), scratch_, s.dx);
    grads_complete(c_.first_layer + i);
    if (on_unit_done) unit_done(c_.first_layer + i, on_unit_done);
  }
  if (c_.first()) {
    p_.require(-1);
    if (!(s_.gpt && c_.last())) p_.open_grads(-1);  // else open since the head's backward
    const DV<float**> dx = whole_rows(s.dx);
    kk::embedding_backward(exec, p_.dw(tokens_), dx, s.index);
    if (s_.gpt) kk::position_embedding_backward(exec, p_.dw(positions_), dx, d_.T);
    grads_complete(-1);
    if (on_unit_done) on_unit_done(-1);
  } else if (k_.bf16) {
    kk::convert(exec, s.grad16, message_part(s.dx));  // sent in bf16
  }
  if (phase_timing_) kk::fence(exec, "kformer::backward_timing");
  backward_ms += timer.seconds() * 1e3;
}

Flops Stage::flops() const {
  Flops f;
  for (int l = 0; l < c_.n_layers; ++l) f += block_flops(d_), f.recompute += recompute_flops(d_, mode_of(l), k_.attention);
  if (c_.last()) f += head_flops(d_.N(), d_.C, Vl_);
  return f;
}

}  // namespace kformer
