// Activation recomputation (see recompute.hpp): the per-block activations a slot holds under each
// mode, the recomputation before each block's backward, and the bytes this holds.
#include "model/recompute.hpp"

#include <map>
#include <stdexcept>
#include <type_traits>

#include "attention.hpp"
#include "model/block_typed.hpp"
#include "model/stage.hpp"

namespace kformer {
namespace kk = kernels;

namespace {
// Naive attention's probabilities, as the forward computed them, from the kept QKV; its output
// goes to `out` (N, Hl*hd), a backward scratch the backward overwrites.
template <class T>
void refill_scores(const BlockDims& d, TypedActs<T>& t, const DV<T**>& out) {
  kk::attention_forward(Exec(), block_typed::btw(out, d), t.att, block_typed::btw(t.qkv, d), d.Hl, d.KVl);
}
}  // namespace

void Block::recompute_scores(BlockActs& a, BlockScratch& s) const {
  if (!kk::keeps_probabilities(k_.attention)) return;  // fused: the backward recomputes them itself
  if (k_.bf16)
    refill_scores(d_, a.h, s.h.d_att_out);
  else
    refill_scores(d_, a.f, s.d_att_out);
}

Recompute Stage::mode_of(int block) const {
  if (recompute_ != Recompute::full) return recompute_;
  return block < full_blocks_ ? Recompute::full : Recompute::none;
}

void Stage::set_recompute(Recompute r, int full_blocks) {
  if (!slots_.empty()) throw std::logic_error("Stage::set_recompute after the first micro-batch");
  recompute_ = r;
  full_blocks_ = r == Recompute::full ? full_blocks : 0;
  const MemoryKindScope kind(MemoryKind::activations);  // what the recomputation re-fills, as the slots' own
  // full and op: the buffers the blocks' forwards share (op's blocks keep their attention's own)
  if (full_blocks_ > 0 || r == Recompute::op)
    work_ = std::make_unique<BlockActs>(d_, k_.attention, scratch_.att, k_.bf16, r != Recompute::op);
  if (r == Recompute::selective && kk::keeps_probabilities(k_.attention)) {
    if (k_.bf16)
      scores16_ = scratch<kk::bf16****>("att_recomputed_bf16", d_.B, d_.Hl, d_.T, d_.T);
    else
      scores_ = scratch<float****>("att_recomputed", d_.B, d_.Hl, d_.T, d_.T);
  }
}

BlockActs Stage::make_acts(int block) {
  if (mode_of(block) == Recompute::full) {  // the block's output of its own, the rest shared
    BlockActs a = *work_;
    // bf16: the last block's output is read only within its forward call (sent as out16, or the
    // head's input), and its backward re-runs it: one buffer of the chunk's (Slot).
    if (shares_last_output() && block == c_.n_layers - 1) {
      if (!shared_out_.data()) shared_out_ = scratch_view("x_out", d_.rows(), d_.C);
      a.x_out = shared_out_;
    } else {
      a.x_out = scratch_view("x_out", d_.rows(), d_.C);
    }
    return a;
  }
  if (mode_of(block) == Recompute::op) {  // the shared set but for what the block keeps
    BlockActs a = *work_;
    a.own_op_buffers(d_, k_.bf16);
    return a;
  }
  BlockActs a(d_, k_.attention, scratch_.att, k_.bf16, !scores_.data() && !scores16_.data());
  if (scores_.data()) a.f.att.att = scores_;
  if (scores16_.data()) a.h.att.att = scores16_;
  return a;
}

BlockActs& Stage::for_backward(int i, Slot& s) {
  const DV<float**> x_in = i ? s.acts[i - 1].x_out : s.x_in;
  const Recompute mode = mode_of(i);
  if (mode == Recompute::full) {  // re-run the forward into the shared set (its own x_out)
    p_.require(c_.first_layer + i);
    blocks_[i].forward(x_in, *work_, scratch_);
    return *work_;
  }
  if (mode == Recompute::selective) blocks_[i].recompute_scores(s.acts[i], scratch_);
  if (mode == Recompute::op) blocks_[i].recompute_op(x_in, s.acts[i], scratch_);
  return s.acts[i];
}

std::int64_t Stage::activation_bytes() const {
  std::map<const void*, std::int64_t> held;  // by allocation: shared buffers count once
  const auto add = [&](const auto& v) {
    if (v.data()) held[v.data()] = std::int64_t(v.span()) * std::int64_t(sizeof(typename std::decay_t<decltype(v)>::value_type));
  };
  const auto add_typed = [&](const auto& t) {  // TypedActs<float> or <bf16>: the one allocated counts
    for (const auto* v : {&t.ln1, &t.ln2, &t.qkv, &t.att_out, &t.mlp_in, &t.act, &t.qv, &t.gate}) add(*v);
    add(t.att.att);
    add(t.att.lse);
  };
  const auto add_acts = [&](const BlockActs& a) {
    for (const auto* v : {&a.x_mid, &a.x_out}) add(*v);
    for (const auto* v : {&a.mean1, &a.rstd1, &a.mean2, &a.rstd2}) add(*v);
    add_typed(a.f);
    add_typed(a.h);
  };
  for (const Slot& s : slots_) {
    for (const BlockActs& a : s.acts) add_acts(a);
    add(s.x_in);
    add(s.dx);
    add(s.in16);  // bf16 between chunks: the input kept as received, the messages as they travel
    add(s.out16);
    add(s.grad16);
  }
  if (work_) add_acts(*work_);
  add(gathered_grad16_);
  add(scores_);
  add(scores16_);
  std::int64_t total = 0;
  for (const auto& h : held) total += h.second;
  return total;
}

}  // namespace kformer
