// A chunk's work list (see chunk_work.hpp), mirroring stage.cpp and block.cpp call by call.
#include "predict/chunk_work.hpp"

#include <utility>

#include "model/flops.hpp"
#include "predict/kernel_costs.hpp"

namespace kformer::predict {
namespace {

struct Builder {
  const MachineProfile& p;
  const BlockDims& d;
  const std::string& attention;
  bool tp;  // tensor parallel: the all-reduces happen
  std::vector<WorkItem>* out = nullptr;
  std::vector<WorkItem>* weight = nullptr;  // split backward: where the weight-gradient halves go

  void compute(const char* name, double us) { out->push_back({ItemKind::compute, name, us * p.compute_scale, 0, 0}); }
  void gemm(const char* name, int n_out, int k_in, bool backward) {
    const double us = gemm_us(p, d.N(), n_out, k_in, backward);
    if (!backward || !weight) return compute(name, us);
    compute(name, us / 2);  // dX = dY W here, dW = dY^T X (the same FLOPs) in W
    std::swap(out, weight);
    compute(name, us / 2);
    std::swap(out, weight);
  }
  void memory(const char* name, const std::string& family, double b) { compute(name, memory_us(p, family, b)); }
  void allreduce(double b) {
    if (tp) out->push_back({ItemKind::tp_allreduce, "allreduce", 0, b, 0});
  }
  void marker(ItemKind k, int layer) {  // a unit is complete after its W when the backward is split
    (k == ItemKind::unit_done && weight ? weight : out)->push_back({k, "", 0, 0, layer});
  }

  void block_forward() {
    const double N = d.N(), C = d.C;
    memory("norm", "norm", bytes::norm(N, C, false));
    gemm("qkv", d.qkv_width(), d.C, false);
    if (!d.gpt) memory("rope", "rope", bytes::rope(N, double(d.Hl + d.KVl) * d.hd));
    compute("attention", attention_us(p, attention, d.B, d.T, d.Hl, d.KVl, d.hd, false));
    gemm("attn_out", d.C, d.q_width(), false);
    allreduce(4 * N * C);
    memory("residual", "residual", bytes::residual(N, C));
    memory("norm", "norm", bytes::norm(N, C, false));
    gemm("mlp_in", d.mlp_in_width(), d.C, false);
    memory("activation", "activation", bytes::activation(N, d.Fl, d.gpt, false));
    gemm("mlp_out", d.C, d.Fl, false);
    allreduce(4 * N * C);
    memory("residual", "residual", bytes::residual(N, C));
  }

  void block_backward() {
    const double N = d.N(), C = d.C;
    gemm("mlp_out", d.C, d.Fl, true);
    memory("activation", "activation", bytes::activation(N, d.Fl, d.gpt, true));
    gemm("mlp_in", d.mlp_in_width(), d.C, true);
    allreduce(4 * N * C);
    memory("norm", "norm", bytes::norm(N, C, true));
    memory("residual", "residual", bytes::residual(N, C));
    gemm("attn_out", d.C, d.q_width(), true);
    compute("attention", attention_us(p, attention, d.B, d.T, d.Hl, d.KVl, d.hd, true));
    if (!d.gpt) memory("rope", "rope", bytes::rope(N, double(d.Hl + d.KVl) * d.hd));
    gemm("qkv", d.qkv_width(), d.C, true);
    allreduce(4 * N * C);
    memory("norm", "norm", bytes::norm(N, C, true));
    memory("residual", "residual", bytes::residual(N, C));
  }
};

}  // namespace

ChunkWork chunk_work(const MachineProfile& p, const ModelShape& s, const BlockDims& d, const ChunkSpec& c,
                     const std::string& attention, bool gpt_tied_copy_on_last, bool split_backward) {
  ChunkWork w;
  Builder b{p, d, attention, s.tp > 1};
  const double N = d.N(), C = d.C, Vl = double(s.vocab_padded) / s.tp;
  const int L = s.n_layers;

  b.out = &w.forward;
  if (c.first()) {
    b.marker(ItemKind::require, -1);
    b.memory("embedding", "embedding", bytes::embedding(N, C));
    b.allreduce(4 * N * C);
  }
  for (int l = c.first_layer; l < c.first_layer + c.n_layers; ++l) {
    b.marker(ItemKind::require, l);
    b.block_forward();
  }
  if (c.last()) {
    b.marker(ItemKind::require, L);
    if (s.gpt) b.marker(ItemKind::require, -1);
    b.memory("norm", "norm", bytes::norm(N, C, false));
    b.gemm("head", int(Vl), d.C, false);
    b.memory("cross_entropy", "cross_entropy", bytes::cross_entropy(N, Vl, false) / 2);
    b.allreduce(4 * N);
    b.memory("cross_entropy", "cross_entropy", bytes::cross_entropy(N, Vl, false) / 2);
    b.allreduce(8 * N);
    b.out = &w.head_backward;
    b.memory("cross_entropy", "cross_entropy", bytes::cross_entropy(N, Vl, true));
    b.gemm("head", int(Vl), d.C, true);
    b.allreduce(4 * N * C);
    b.memory("norm", "norm", bytes::norm(N, C, true));
  }

  b.out = &w.backward;
  if (split_backward) b.weight = &w.weight;
  if (c.last()) {
    b.marker(ItemKind::unit_done, L);
    if (!c.first() && gpt_tied_copy_on_last) b.marker(ItemKind::unit_done, -1);
  }
  for (int l = c.first_layer + c.n_layers - 1; l >= c.first_layer; --l) {
    b.marker(ItemKind::require, l);
    b.block_backward();
    b.marker(ItemKind::unit_done, l);
  }
  if (c.first()) {
    b.marker(ItemKind::require, -1);
    if (split_backward) b.out = &w.weight;  // the embedding's scatter is W (stage_split.cpp)
    b.memory("embedding", "embedding", bytes::embedding(N, C) * (s.gpt ? 2 : 1));
    b.marker(ItemKind::unit_done, -1);
  }

  Flops f;
  for (int l = 0; l < c.n_layers; ++l) f += block_flops(d);
  if (c.last()) f += head_flops(d.N(), d.C, int(Vl));
  w.forward_flops = f.forward;
  w.backward_flops = f.backward;
  return w;
}

double compute_us(const std::vector<WorkItem>& items) {
  double t = 0;
  for (const auto& i : items)
    if (i.kind == ItemKind::compute) t += i.us;
  return t;
}

}  // namespace kformer::predict
