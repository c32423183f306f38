// Memory per rank (see memory.hpp).
#include "plan/memory.hpp"

#include <sys/resource.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <sstream>

#include "platform/errors.hpp"
#include "plan/run_plan.hpp"
#include "model/model_spec.hpp"
#include "model/param_store.hpp"
#include "model/recompute.hpp"
#include "parallel/schedule.hpp"
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace kformer {
namespace {

constexpr double kFloat = 4, kHalf = 2;

// The native GEMM's packing workspace (kernels/gemm/gemm_native.hpp): (M + N) x K floats of the
// largest GEMM the rank runs, forward (N tokens x in -> out), input gradient (out -> in) and
// weight gradient (K = the tokens), at most its 8 Mi-float budget. Vendor GEMMs keep their own.
double gemm_workspace_floats(const BlockDims& d, double vocab_rows, bool head) {
  const double N = d.N();
  double most = 0;
  const auto gemm = [&](double in, double out) {
    most = std::max({most, (N + out) * in, (N + in) * out, (out + in) * N});
  };
  gemm(d.C, d.qkv_width());
  gemm(d.q_width(), d.C);
  gemm(d.C, d.mlp_in_width());
  gemm(d.Fl, d.C);
  if (head) gemm(d.C, vocab_rows);
  return std::min(most, double(std::int64_t(8) << 20));
}

MemoryEstimate estimate_stage(const RunPlan& plan, int stage) {
  const RunSettings& rs = plan.settings;
  const ModelShape& s = plan.shape;
  const Numerics& num = plan.numerics;
  const int pp = rs.parallel.pp, dp = rs.parallel.dp, zero = num.zero;
  const int v = rs.parallel.virtual_stages;
  const auto& chunks = plan.chunks;
  int count = 0;  // blocks on this pipeline rank, over its chunks
  for (std::size_t c = stage; c < chunks.size(); c += pp) count += chunks[c].second;
  double P = 0, largest_unit = 0, vectors = 0;
  std::map<int, double> units;
  for (const auto& p : rank_params(s, chunks, pp, stage)) {
    P += double(p.local_size(s.tp));
    units[p.layer] += double(p.local_size(s.tp));
    if (p.cols == 1) vectors += double(p.local_size(s.tp));
  }
  for (const auto& u : units) largest_unit = std::max(largest_unit, u.second);
  MemoryEstimate e;
  e.bf16 = num.bf16();
  const double shards = zero >= 1 ? dp : 1;
  // Bytes per parameter value: fp32 masters, plus their bf16 copies in bf16 (so are the gather pool's).
  // bf16 under ZeRO-1/2 (ParamStore::masters_sharded): the whole model in bf16, this rank's shard
  // of the fp32 masters, and the vectors widened to fp32.
  const double value_bytes = e.bf16 ? kFloat + kHalf : kFloat;
  e.masters_sharded = num.shards_masters;
  if (e.masters_sharded)
    e.params = kHalf * P + kFloat * (P / shards + vectors);
  else
    e.params = value_bytes * (num.shards_values ? P / shards + 3 * largest_unit : P);  // + the gather pool
  // Gradients: the flat fp32 buffer; when ZeRO-3 shards them, this rank's shards and the reusable
  // whole-unit buffers (ParamStore's kGradBuffers), with bf16 copies of them that travel under a
  // bf16 reduction; a bf16 gradient buffer (Numerics::bf16_grads) and the fp32 unit buffers the
  // backward writes; else (zb-h1) a bf16 reduction adds a bf16 copy of the whole (model/numerics.hpp).
  const bool bf16_reduce = num.bf16_reduce();
  const double buffers = std::min<double>(kGradBuffers, units.size()) * largest_unit;
  if (num.shards_grads) {
    e.grads = kFloat * (P / shards + buffers) + (bf16_reduce ? kHalf * buffers : 0);
  } else if (num.bf16_grads()) {  // one fp32 unit buffer; two on gpt's last stage (the head's and the tied table's)
    const bool tied_open = rs.model.family == Family::gpt && int(chunks.size() - 1) % pp == stage;
    e.grads = kHalf * P + kFloat * std::min<double>(tied_open ? 2 : 1, units.size()) * largest_unit;
  } else {
    e.grads = kFloat * P + (bf16_reduce ? kHalf * P : 0);
  }
  e.optimizer = 2 * kFloat * P / shards;
  const BlockDims& d = plan.dims;
  const bool keeps_probs = kernels::keeps_probabilities(plan.attention);  // naive, batched_gemm
  const Recompute recompute = rs.train.recompute;
  // R rows of the residual stream (N/tp under sequence parallelism, else N); the TP regions hold N.
  const double N = d.N(), R = d.rows(), C = d.C;
  const double att_saved = keeps_probs ? double(d.B) * d.Hl * d.T * d.T : double(d.B) * d.Hl * d.T;
  const double tp_region = N * d.qkv_width() + N * d.q_width() + N * d.mlp_in_width() + N * d.Fl;
  // Kept per block: fp32 in both precisions the residual stream (x_mid, x_out), the norms'
  // statistics and the fused attention's logsumexp; in the activation precision (tb bytes) the
  // norms' outputs, the TP region's qkv, attention output, MLP input and activation, and naive
  // attention's probabilities.
  const double tb = e.bf16 ? kHalf : kFloat;
  const double block_all = kFloat * (2 * R * C + 4 * R + (keeps_probs ? 0 : att_saved)) +
                           tb * (2 * R * C + tp_region + (keeps_probs ? att_saved : 0));  // BlockActs, none
  // What a slot keeps per block, and what each chunk adds once to recompute the rest.
  const double per_layer = recompute == Recompute::full                     ? kFloat * R * C
                           : recompute == Recompute::selective && keeps_probs ? block_all - tb * att_saved
                                                                           : block_all;
  const double recompute_set = recompute == Recompute::full                     ? block_all
                               : recompute == Recompute::selective && keeps_probs ? tb * att_saved
                                                                               : 0;
  // The slots whose activations this stage holds at once, spread over its v chunks: what its
  // schedule says (schedule.hpp).
  const int in_flight = slots_in_flight(plan.schedule, stage, rs.parallel.schedule);
  e.micro_batches_in_flight = in_flight;
  // Each slot: its blocks' activations and the chunk's input and its gradient (R,C) each. In bf16
  // between chunks (Stage::Slot): the first chunk's slot its fp32 input (and under zb-h1 its fp32
  // gradient) and the bf16 output and gradient as they travel; the last chunk's its bf16 input as
  // received, its fp32 gradient and the bf16 one it sends; a middle chunk's its bf16 input, output
  // and gradient; what travels is this rank's part of the rows (BlockDims::message_rows). And once
  // per chunk: the fp32 input all but the first widen theirs into, the fp32 gradient all but the
  // last (and the first under zb-h1) work in, the bf16 gradient gathered whole where messages are
  // split, under full recomputation the last block's output (so a slot keeps one x_out less).
  const double RC = R * C, part = double(d.message_rows()) / d.rows();
  double slots = in_flight * (per_layer * (double(count) / v) + kFloat * 2 * RC), shared = 0;
  if (e.bf16 && chunks.size() > 1) {
    const int S = int(chunks.size());
    const bool split = splits_backward(rs.parallel.schedule);
    int first = 0, last = 0, nonempty = 0;
    for (int c = stage; c < S; c += pp) {
      if (c == 0) first = chunk_slots_in_flight(plan.schedule, stage, c, rs.parallel.schedule);
      if (c == S - 1) last = chunk_slots_in_flight(plan.schedule, stage, c, rs.parallel.schedule);
      if (chunks[c].second > 0) ++nonempty;
      if (c > 0) shared += kFloat * RC;                                           // x_in
      if (c < S - 1 && !(c == 0 && split)) shared += kFloat * RC;                 // dx
      if (c < S - 1 && d.splits_messages()) shared += kHalf * RC;                 // the gathered gradient
    }
    const int middle = std::max(0, in_flight - first - last);
    const double travel = kHalf * 2 * part * RC;  // out16 and grad16
    slots = in_flight * per_layer * (double(count) / v) + first * (kFloat * (split ? 2 : 1) * RC + travel) +
            last * ((kHalf + kFloat + kHalf * part) * RC) + middle * (kHalf * RC + travel);
    if (recompute == Recompute::full) {
      slots -= in_flight * kFloat * RC * double(nonempty) / v;
      shared += kFloat * RC * nonempty;
    }
  } else if (e.bf16 && recompute == Recompute::full && count > 0) {  // one chunk: its last block's output
    slots -= in_flight * kFloat * RC;
    shared += kFloat * RC;
  }
  e.activations = slots + shared + v * recompute_set;
  // Per chunk, the backward's scratch (and the all-gather buffer under sequence parallelism, which
  // zb-h1's W gathers its operands into again, so W holds nothing more); on
  // the last chunk the final norm, the logits and the loss's buffers.
  const double Vl = double(s.vocab_padded) / s.tp;
  // The attention backward's scratch: the fused kernel's delta (B,H,T); the naive one's d(scores)
  // for one sequence at a time (H,T,T), also its bf16 forward's fp32 scores.
  const double att_scratch = keeps_probs ? double(d.Hl) * d.T * d.T : att_saved;
  // The TP region's fp32 gradients d_att_out, d_qkv, d_mlp_in, d_act; in bf16 the four share one
  // buffer (block.cpp), and their bf16 roundings are counted below.
  const double tp_grads =
      e.bf16 ? N * std::max({double(d.qkv_width()), double(d.mlp_in_width()), double(d.Fl), double(d.q_width())})
             : tp_region;
  const double scratch = 4 * N * C + tp_grads + att_scratch + (d.sp > 1 ? N * C : 0);
  const bool last = int(chunks.size() - 1) % pp == stage;
  // kernels.gemm=auto is decided after this estimate: counted as native, the larger.
  const double gemm = rs.kernels.gemm != GemmSetting::vendor ? gemm_workspace_floats(d, Vl, last) : 0;
  e.workspace = kFloat * (v * scratch + (last ? N * C + N * Vl + 5 * N : 0) + gemm);
  if (e.bf16)  // the rounded gradients the backward's GEMMs read (and the bf16 all-gather buffer
               // under sequence parallelism), and the head's bf16 gradient
    e.workspace += kHalf * v * (N * d.qkv_width() + N * d.mlp_in_width() + N * C + N * d.q_width() +
                                (d.sp > 1 ? N * C : 0)) +
                   (last ? kHalf * N * Vl : 0);
  // batched_gemm's kept buffers, shared by every block (kernels/attention/attention_batched.hpp): in bf16,
  // one sequence's d(scores) for the products and its dqkv sums.
  if (plan.attention == AttentionKind::batched_gemm && e.bf16)
    e.workspace += kHalf * double(d.Hl) * d.T * d.T + kFloat * double(d.T) * d.qkv_width();
  // cuDNN's flash backward accumulates dQ in fp32 in its workspace (attention_cudnn.cpp): one
  // micro-batch's queries, shared by every block.
  if (plan.attention == AttentionKind::vendor) e.workspace += kFloat * N * d.q_width();
  return e;
}

}  // namespace

nlohmann::json MemoryEstimate::to_json() const {
  return {{"estimated_bytes", total()},
          {"precision", bf16 ? "bf16" : "fp32"},
          {"param_bytes", masters_sharded ? "bf16 copies + this rank's shard of the fp32 masters (2 + 4/dp per parameter)"
                          : bf16          ? "fp32 masters + bf16 copies (6 per parameter)"
                                          : "fp32 (4 per parameter)"},
          {"estimate_split_bytes",
           {{"params", params}, {"grads", grads}, {"optimizer", optimizer}, {"activations", activations},
            {"workspace", workspace}}},
          {"micro_batches_in_flight", micro_batches_in_flight},
          {"activation_bytes_estimated", activations_most}};
}

MemoryEstimate estimate_memory(const RunPlan& plan) {
  estimates_made().fetch_add(1);
  MemoryEstimate worst;
  double acts = 0;
  for (int st = 0; st < plan.settings.parallel.pp; ++st) {
    const MemoryEstimate e = estimate_stage(plan, st);
    if (e.total() > worst.total()) worst = e;
    acts = std::max(acts, e.activations);
  }
  worst.activations_most = acts;
  return worst;
}

std::string describe(const MemoryEstimate& e) {
  std::ostringstream os;
  os.precision(3);
  const char* params_as = e.masters_sharded ? " as bf16 copies + fp32 master shards"
                          : e.bf16          ? " as fp32 masters + bf16 copies"
                                            : "";
  os << e.total() / 1e9 << " GB (params " << e.params / 1e9 << params_as
     << ", grads " << e.grads / 1e9 << ", optimizer "
     << e.optimizer / 1e9 << ", activations " << e.activations / 1e9 << ", workspace " << e.workspace / 1e9 << "; "
     << e.micro_batches_in_flight << " micro-batch(es) in flight)";
  return os.str();
}

std::atomic<long>& estimates_made() {
  static std::atomic<long> count{0};
  return count;
}

void check_memory_limit(const RunSettings& s, const MemoryEstimate& e) {
  const double limit = s.memory_limit_gb * 1e9;
  if (limit <= 0 || e.total() <= limit) return;
  std::ostringstream msg;
  msg.precision(3);
  msg << "memory.limit_gb=" << s.memory_limit_gb << " is below the estimate per rank of " << describe(e) << ": ";
  int fits = 0;
  const std::int64_t per_dp = std::int64_t(s.train.global_batch) / s.parallel.dp;
  for (int b = s.train.micro_batch - 1; b >= 1 && !fits; --b) {
    if (per_dp % b) continue;  // micro-batches must divide the rank's share of the batch
    RunSettings smaller = s;  // what if: the same layout at micro-batch b
    smaller.train.micro_batch = b;
    smaller.parallel.microbatches = static_cast<int>(per_dp / b);
    if (make_plan(smaller).memory.total() <= limit) fits = b;
  }
  if (fits) msg << "the largest train.micro_batch that fits is " << fits;
  else msg << "no train.micro_batch fits; raise parallel.zero, parallel.tp or parallel.pp, or memory.limit_gb";
  throw ConfigError(msg.str());
}

void check_estimate_fits(const RunSettings& s, const MemoryEstimate& e, double bytes, const std::string& what,
                         const std::string& other_fix) {
  if (s.memory_limit_gb > 0 || e.total() <= bytes) return;
  std::ostringstream msg;
  msg.precision(3);
  msg << "the memory estimate per rank, " << describe(e) << ", exceeds the " << bytes / 1e9 << " GB " << what
      << ": raise parallel.zero, parallel.tp or parallel.pp, lower train.micro_batch or model sizes, " << other_fix;
  throw ConfigError(msg.str());
}

double measured_peak_bytes() {
#if defined(KOKKOS_ENABLE_CUDA)
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return double(total_b - free_b);
#endif
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0;  // kilobytes on Linux
}

}  // namespace kformer
