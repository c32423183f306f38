// The whole model on one rank (see model.hpp).
#include "model.hpp"

#include <Kokkos_Timer.hpp>

#include "comm/views.hpp"
#include "cross_entropy.hpp"
#include "layernorm.hpp"
#include "rmsnorm.hpp"

namespace kformer {
namespace kk = kernels;

Model::Model(const ModelShape& shape, int micro_batch, int seq_len, KernelChoice kernels, const ParamStore& params,
             comm::Communicator* tp)
    : s_(shape), d_(block_dims(shape, micro_batch, seq_len)), k_(kernels), p_(params), tp_(tp),
      tp_rank_(tp ? tp->rank() : 0), scratch_(d_, kernels.attention) {
  Vl_ = s_.vocab_padded / s_.tp;
  v0_ = tp_rank_ * Vl_;
  const int N = d_.N();
  for (int l = 0; l < s_.n_layers; ++l) {
    blocks_.emplace_back(l, d_, params, tp, kernels);
    acts_.emplace_back(d_, kernels.attention, scratch_.att);
  }
  inputs_ = scratch<std::int32_t*>("inputs", N);
  targets_ = scratch<std::int32_t*>("targets", N);
  emb_ = scratch_view("emb", N, d_.C);
  lnf_ = scratch_view("lnf", N, d_.C);
  dx_ = scratch_view("dx", N, d_.C);
  logits_ = scratch_view("logits", N, Vl_);
  stats_ = scratch_view("xent_stats", 2, N);
  lnf_mean_ = scratch<float*>("lnf_mean", N);
  lnf_rstd_ = scratch<float*>("lnf_rstd", N);
  lmax_ = scratch<float*>("xent_max", N);
  loss_ = scratch<float*>("loss", N);
}

void Model::tp_allreduce(const DV<float**>& x, comm::ReduceOp op) const {
  if (tp_ && tp_->size() > 1) comm::allreduce(*tp_, x, op);
}

DV<float**> Model::head_weight() const { return p_.w(s_.gpt ? "embed.tokens.weight" : "head.weight"); }
DV<float**> Model::head_grad() const { return p_.dw(s_.gpt ? "embed.tokens.weight" : "head.weight"); }

void Model::forward(const std::vector<std::int32_t>& tokens) {
  Exec exec;
  const int B = d_.B, T = d_.T;
  host_inputs_.resize(std::size_t(B) * T);
  auto hin = Kokkos::create_mirror_view(inputs_);
  auto htg = Kokkos::create_mirror_view(targets_);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      host_inputs_[b * T + t] = hin(b * T + t) = tokens[std::size_t(b) * (T + 1) + t];
      htg(b * T + t) = tokens[std::size_t(b) * (T + 1) + t + 1];
    }
  Kokkos::deep_copy(exec, inputs_, hin);
  Kokkos::deep_copy(exec, targets_, htg);

  // The position table is replicated: one TP rank adds it, so the all-reduce counts it once.
  p_.require(-1);
  const DV<float**> wpe = s_.gpt && tp_rank_ == 0 ? p_.w("embed.positions.weight") : DV<float**>();
  kk::embedding_forward(exec, emb_, inputs_, p_.w("embed.tokens.weight"), v0_, wpe, T);
  tp_allreduce(emb_);
  for (int l = 0; l < s_.n_layers; ++l) {
    p_.require(l);
    blocks_[l].forward(l ? acts_[l - 1].x_out : emb_, acts_[l], scratch_);
  }
  p_.require(s_.n_layers);
  p_.require(-1);  // the tied head (gpt) lives in the embedding's unit
  const DV<float**> x_last = s_.n_layers ? acts_.back().x_out : emb_;
  if (s_.gpt)
    kk::layernorm_forward(exec, lnf_, lnf_mean_, lnf_rstd_, x_last, p_.v("final_norm.weight"), p_.v("final_norm.bias"));
  else
    kk::rmsnorm_forward(exec, lnf_, lnf_rstd_, x_last, p_.v("final_norm.weight"));
  kk::matmul_forward(exec, k_.gemm, logits_, lnf_, head_weight());
}

double Model::loss_and_dlogits(float grad_scale) {
  Exec exec;
  kk::xent_local_max(exec, lmax_, logits_, v0_, s_.vocab);
  if (tp_ && tp_->size() > 1) comm::allreduce(*tp_, lmax_, comm::ReduceOp::max);
  kk::xent_local_sums(exec, stats_, logits_, targets_, lmax_, v0_, s_.vocab);
  tp_allreduce(stats_);
  kk::xent_finish(exec, loss_, logits_, logits_, targets_, lmax_, stats_, v0_, s_.vocab, grad_scale);
  double sum = 0;
  const auto l = loss_;
  Kokkos::parallel_reduce(
      "kformer::loss_sum", Kokkos::RangePolicy<Exec>(exec, 0, l.extent(0)),
      KOKKOS_LAMBDA(const int i, double& acc) { acc += l(i); }, sum);
  return sum;
}

void Model::backward(const std::function<void(int)>& on_unit_done) {
  Exec exec;
  const int L = s_.n_layers;
  p_.require(L);
  p_.require(-1);
  kk::matmul_backward(exec, k_.gemm, scratch_.d_ln, head_grad(), DV<float*>(), logits_, lnf_, head_weight());
  tp_allreduce(scratch_.d_ln);
  const DV<float**> x_last = L ? acts_.back().x_out : emb_;
  if (s_.gpt)
    kk::layernorm_backward(exec, dx_, p_.dv("final_norm.weight"), p_.dv("final_norm.bias"), scratch_.d_ln, x_last,
                           p_.v("final_norm.weight"), lnf_mean_, lnf_rstd_);
  else
    kk::rmsnorm_backward(exec, dx_, p_.dv("final_norm.weight"), scratch_.d_ln, x_last, p_.v("final_norm.weight"),
                         lnf_rstd_);
  if (on_unit_done) on_unit_done(L);
  for (int l = L - 1; l >= 0; --l) {
    p_.require(l);
    blocks_[l].backward(l ? acts_[l - 1].x_out : emb_, acts_[l], scratch_, dx_);
    if (on_unit_done) on_unit_done(l);
  }
  p_.require(-1);
  const auto index = kk::make_token_index<Exec>(host_inputs_, v0_, Vl_);
  kk::embedding_backward(exec, p_.dw("embed.tokens.weight"), dx_, index);
  if (s_.gpt) kk::position_embedding_backward(exec, p_.dw("embed.positions.weight"), dx_, d_.T);
  if (on_unit_done) on_unit_done(-1);
}

double Model::forward_backward(const std::vector<std::int32_t>& tokens, float grad_scale,
                               const std::function<void(int)>& on_unit_done) {
  Kokkos::Timer timer;
  forward(tokens);
  const double loss = loss_and_dlogits(grad_scale);  // its reduction fences
  last_forward_ms = timer.seconds() * 1e3;
  timer.reset();
  backward(on_unit_done);
  Kokkos::fence();
  last_backward_ms = timer.seconds() * 1e3;
  return loss;
}

Flops Model::flops() const {
  Flops f;
  for (int l = 0; l < s_.n_layers; ++l) f += block_flops(d_);
  f += head_flops(d_.N(), d_.C, Vl_);
  return f;
}

}  // namespace kformer
