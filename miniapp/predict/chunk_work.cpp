// A chunk's work list from its described calls (see chunk_work.hpp).
#include "predict/chunk_work.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "model/flops.hpp"
#include "model/model_spec.hpp"
#include "predict/kernel_costs.hpp"

namespace kformer::predict {
namespace kk = kernels;

CallCosts call_costs(const RunSettings& s) {
  CallCosts c(s.predict.attention, s.predict.attention_dropout, s.bf16() && s.predict.tp_precision == TpPrecision::activations,
              s.predict.gather_copy == GatherCopy::copy_out);
  if (s.predict.scatter_copy == ScatterCopy::copy_in) c.copy_in_grad_bytes = s.bf16() ? 2 : 4;
  c.eager_rmsnorm = s.predict.rmsnorm == Fusion::eager;
  c.eager_pointwise = s.predict.pointwise == Fusion::eager;
  c.loss = s.predict.loss;
  c.eager_op_rerun = c.eager_pointwise && s.train.recompute == Recompute::op;
  if (s.bf16()) c.residual = s.predict.residual;
  if (s.predict.logits == LogitsLayout::gathered) c.logits_tp = s.parallel.tp;
  c.logit_bytes = s.bf16() ? 2 : 4;
  c.train_metrics = s.predict.train_metrics == TrainMetrics::composer_lm;
  return c;
}

namespace {
// An element-wise stream of a family the profile may not have measured: the residual add's rate then.
double stream_us(const MachineProfile& p, const char* family, double bytes, bool bf16 = false) {
  return memory_us(p, p.memory_gbps.count(family) ? family : "residual", bytes, bf16);
}
}  // namespace

double kernel_us(const MachineProfile& p, const kk::KernelCall& c, const CallCosts& costs) {
  const auto& s = c.shape;
  if (costs.logits_tp > 1 && c.family == kk::Family::cross_entropy && s[1] > 0) {
    // predict.logits=gathered: the same pass over the whole vocabulary's logits
    kk::KernelCall whole = c;
    whole.shape[1] *= costs.logits_tp;
    whole.bytes *= costs.logits_tp;
    CallCosts one = costs;
    one.logits_tp = 1;
    return kernel_us(p, whole, one);
  }
  if (costs.eager_rmsnorm && c.family == kk::Family::norm && std::strncmp(c.name, "rmsnorm", 7) == 0)
    return eager_rmsnorm_us(p, s[0], s[1], c.backward);  // the other norms at the family's rate, below
  // predict.residual: the norms and residual adds over (rows, channels) of the stream (not the 1-D
  // gradient accumulations that share the residual kernel)
  const bool stream = (c.family == kk::Family::norm || c.family == kk::Family::residual) && s[1] > 1;
  if (costs.residual != ResidualStream::fp32 && stream)
    return residual_stream_us(p, costs.residual, c.family == kk::Family::norm, c.backward, s[0], s[1]);
  if (costs.loss != LossKernels::fused && c.family == kk::Family::cross_entropy && s[1] > 0)
    return eager_loss_us(p, costs.loss, c.name, costs.logit_bytes == 2, double(s[0]) * s[1]);  // the run's precision
  if (costs.eager_pointwise && c.family == kk::Family::rope) return eager_rope_us(p, c.bf16, double(s[0]) * s[1] * s[2]);
  if (costs.eager_pointwise && c.family == kk::Family::activation && std::strncmp(c.name, "swiglu", 6) == 0)
    return eager_swiglu_us(p, c.bf16, double(s[0]) * s[1], c.backward);
  switch (c.family) {
    case kk::Family::gemm: {
      // a software that keeps its stream in bf16 (predict.residual) writes its GEMMs' outputs in bf16
      const int out_bytes = costs.residual != ResidualStream::fp32 && c.out_bytes > 0 ? 2 : c.out_bytes;
      const double full = gemm_us(p, c.bf16, int(s[0]), int(s[1]), int(s[2]), c.backward, out_bytes);
      return c.backward && s[3] != 3 ? full / 2 : full;  // one of the backward's two products
    }
    case kk::Family::attention: {
      // torchtitan's repeat_kv: the K and V heads copied out for SDPA (which took no GQA then)
      double repeat =
          costs.eager_pointwise ? eager_repeat_kv_us(p, c.bf16, double(s[0]) * s[1], int(s[2]), int(s[3]), int(s[4])) : 0;
      // torchtitan's selective op policy keeps SDPA's output, not its inputs: before SDPA's backward it
      // re-runs Q's RoPE (kformer keeps Q rotated; K's it re-runs itself) and repeat_kv's copies.
      if (costs.eager_op_rerun && c.backward)
        repeat = 2 * repeat + eager_rope_us(p, c.bf16, double(s[0]) * s[1] * s[2] * s[4], 1);
      if (costs.attention != AttentionModel::kformer)
        return repeat + system_attention_us(p, c.bf16, costs.attention, int(s[0]), int(s[1]), int(s[2]), int(s[4]),
                                            c.backward, costs.attention_dropout);
      return repeat + attention_us(p, c.bf16, name_of(static_cast<AttentionKind>(s[5])), int(s[0]), int(s[1]),
                                   int(s[2]), int(s[3]), int(s[4]), c.backward);
    }
    case kk::Family::convert:
    case kk::Family::copy:
    case kk::Family::reduction:  // element-wise streams: the residual add's rate unless measured
      return stream_us(p, kk::family_name(c.family), c.bytes, c.bf16);
    default: return memory_us(p, kk::family_name(c.family), c.bytes, c.bf16);
  }
}

std::vector<WorkItem> work_items(const MachineProfile& p, const std::vector<WorkEntry>& entries,
                                 std::vector<WorkItem>* head, const CallCosts& costs) {
  std::vector<WorkItem> items;
  std::vector<WorkItem>* out = &items;
  WorkItem* miss = nullptr;  // inside ParamStore::require's gather: its kernels are the miss's
  for (const WorkEntry& e : entries) {
    switch (e.kind) {
      case WorkEntry::Kind::kernel: {
        if (costs.logits_tp > 1 && std::strcmp(e.call.name, "xent_local_max") == 0) {
          // predict.logits=gathered: ezpz's Replicate() output all-gathers the (rows, Vl) logits over TP
          const double whole = double(e.call.shape[0]) * e.call.shape[1] * costs.logits_tp * costs.logit_bytes;
          out->push_back({ItemKind::tp_comm, "allgather", 0, whole, 0, comm::OpKind::allgather});
        }
        // predict.residual other than fp32: the software keeps activations and their gradients in its
        // 16-bit type end to end, its GEMMs reading and writing it; kformer's passes between its fp32
        // stream and the bf16 GEMM inputs (a GEMM's fp32 output rounded for storage, an fp32 gradient
        // rounded before its GEMM, a pipeline message narrowed or widened) are not its work. The
        // conversions of the parameters (a ZeRO-3 gather's widening, the bf16 copies' refresh) stay.
        if (costs.residual != ResidualStream::fp32 && e.call.family == kk::Family::convert && !miss) break;
        const double us = kernel_us(p, e.call, costs) * p.compute_scale;
        if (miss) {
          miss->us += us;
        } else {
          out->push_back({ItemKind::compute, e.call.name, us, 0, 0});
          out->back().family = kk::family_name(e.call.family);
          const bool both = e.call.family == kk::Family::gemm && e.call.backward && e.call.shape[3] == 3;
          if (both) out->back().half_us = us / 2;  // dx and dW: the same FLOPs each
          const bool loss_done =
              std::strcmp(e.call.name, "xent_whole_rows") == 0 || std::strcmp(e.call.name, "xent_finish") == 0;
          if (costs.train_metrics && loss_done) {
            // Composer runs them after the micro-batch's whole backward; here they precede the blocks'
            // backward on the one compute stream: the same compute, without the credit of what the last
            // units' reduce-scatters would overlap at the end
            const double logits = double(e.call.shape[0]) * e.call.shape[1] * costs.logits_tp;
            out->push_back({ItemKind::compute, "train_metrics",
                            eager_train_metrics_us(p, costs.logit_bytes == 2, logits) * p.compute_scale, 0, 0});
          }
        }
        break;
      }
      case WorkEntry::Kind::comm:
        if (miss && e.group == "dp") miss->bytes += e.bytes;  // the gather of a ZeRO-3 unit
        if (e.group == "tp") {
          // predict.tp_precision=activations: what kformer sums in fp32 the other systems move in bf16
          const bool halved = costs.tp_halved && e.type == comm::DType::f32 && e.payload != comm::Payload::other;
          out->push_back({ItemKind::tp_comm, comm::op_name(e.op), 0, halved ? e.bytes / 2 : e.bytes, 0, e.op, e.payload});
        }
        if (e.group == "dp" && e.op == comm::OpKind::reduce_scatter) {
          if (costs.copy_in_grad_bytes > 0) {
            // FSDP2's foreach_reduce_scatter_copy_in: the unit's unsharded gradients, in the
            // parameters' type (bf16 in a bf16 run), read and written into the reduce-scatter's input
            // in the reduce type (the call's bytes), after the unit's backward on the compute stream
            const double out_bytes = e.type == comm::DType::bf16 ? 2.0 : 4.0;
            const double copied = e.bytes * (1.0 + costs.copy_in_grad_bytes / out_bytes);
            out->push_back({ItemKind::compute, "reduce_scatter_copy_in", stream_us(p, "copy", copied) * p.compute_scale, 0, 0});
          }
          out->push_back({ItemKind::grad_scatter, "reduce_scatter", 0, e.bytes, 0, e.op});
        }
        break;
      case WorkEntry::Kind::require: out->push_back({ItemKind::require, "", 0, 0, e.layer}); break;
      case WorkEntry::Kind::unit_done: out->push_back({ItemKind::unit_done, "", 0, 0, e.layer}); break;
      case WorkEntry::Kind::region_begin:
        if (head && e.group == "kformer::head_backward") out = head;
        if (e.group == "kformer::require" && !out->empty() && out->back().kind == ItemKind::require) miss = &out->back();
        break;
      case WorkEntry::Kind::region_end:
        if (e.group == "kformer::head_backward") out = &items;
        if (e.group == "kformer::require" && miss && costs.copy_out) {
          // FSDP2's foreach_all_gather_copy_out: every gathered byte read and written into the
          // parameters' own tensors, on the compute stream before the unit runs
          miss->us += stream_us(p, "copy", 2 * miss->bytes) * p.compute_scale;
        }
        if (e.group == "kformer::require") miss = nullptr;
        break;
    }
  }
  return items;
}

namespace {

// predict.host: eager PyTorch's host time for the chunk's layers (the profile's eager_host), and
// eager, on the last chunk, the model's top's (its head and loss, with the embedding's few
// operators, which the measurement does not tell apart). Eager, the host runs ahead of the device
// as long as it is faster, so a pass takes the longer of its kernels and its host time: the
// difference, where the host is slower, is one more item. Blocking, the host waits for every
// kernel, so the host time adds. Full and op recomputation run the forward of the blocks they re-run
// again inside the backward. Nothing where the profile has no figure for it.
void add_host_time(ChunkWork& w, const MachineProfile& p, const RunSettings& cfg, int layers, bool top) {
  if (!p.eager_host.costs(cfg.predict.host)) return;
  const bool blocking = cfg.predict.host == HostCost::blocking;
  const EagerHost& h = p.eager_host;
  const double layer_forward = blocking ? h.blocking_layer_forward_us : h.layer_forward_us;
  const bool with_top = top && !blocking;
  const double forward = layers * layer_forward + (with_top ? h.top_forward_us : 0.0);
  const double backward = layers * (blocking ? h.blocking_layer_backward_us : h.layer_backward_us) +
                          cfg.train.rerun_forward_blocks(layers) * layer_forward + (with_top ? h.top_backward_us : 0.0);
  const auto add = [&](std::vector<WorkItem>& list, double host_us) {
    if (list.empty()) return;
    const double extra = blocking ? host_us : std::max(0.0, host_us - compute_us(list));
    if (extra > 0) list.push_back({ItemKind::compute, "eager_host", extra});
  };
  add(w.forward, forward);
  add(w.backward, backward);
  add(w.backward_last, backward);
}

// predict.bucket_pass=nan_check_scale: what Megatron-Core r0.8 does to a unit's fp32 gradient before
// its bucket is reduced (param_and_grad_buffer.py, Bucket.start_grad_sync), once an iteration, so on
// the last micro-batch as the unit is done, before its bucket is posted (the unit_done item's time:
// inside the backward, under a pipeline before the stage sends its input gradient, unless the
// bucket is held back: predict.grad_reduce=delayed, pipeline_sim.hpp). It reads the bucket for
// the NaN check's norm (`grad_data.norm(p=2)`; --check-for-nan-in-loss-and-grad, on by default in
// bf16), then, where DP > 1, multiplies it by 1/DP (`grad_data *= gradient_scaling_factor`). The
// norm's host sync (`assert not norm.isnan()`) is one launch's wait a bucket, not charged.
// predict.bucket_pass=scale (Megatron-LM's DDP of 2022) runs after the pipeline: step_sim.cpp.
void add_bucket_passes(ChunkWork& w, const MachineProfile& p, const RunPlan& plan, const ChunkSpec& c) {
  const RunSettings& cfg = plan.settings;
  if (cfg.predict.bucket_pass != BucketPass::nan_check_scale || plan.numerics.shards_grads) return;
  const bool scale = cfg.parallel.dp > 1;
  std::map<int, double> bytes = unit_gradient_bytes(plan, c.chunk % cfg.parallel.pp);
  for (auto* list : {&w.backward_last, &w.weight_last})
    for (WorkItem& i : *list)
      if (i.kind == ItemKind::unit_done) {
        const double b = bytes[i.layer];
        i.us = (stream_us(p, "reduction", b) + (scale ? memory_us(p, "residual", 2 * b) : 0)) * p.compute_scale;
      }
}

// predict.embedding_grad: PyTorch's F.embedding backward (embedding_dense_backward) makes the token
// embedding's gradient as a zeroed tensor of the rank's whole table (Vl, C) in the weights' type,
// then adds the batch's rows into it, every micro-batch; Megatron's gradient hook then adds that
// into the fp32 main_grad (`param.main_grad.add_(param.grad.data)`: the gradient and main_grad read,
// main_grad written). kformer scatters the rows into its gradient (its embedding_backward, costed
// as described). On the first chunk, before the embedding's unit is done; under zb-h1 in W, which
// holds the embedding's scatter.
void add_embedding_grad(ChunkWork& w, const MachineProfile& p, const RunPlan& plan, const ChunkSpec& c) {
  const EmbeddingGrad how = plan.settings.predict.embedding_grad;
  if (how == EmbeddingGrad::sparse || !c.first()) return;
  const double n = double(plan.shape.vocab_padded) / plan.shape.tp * plan.shape.d_model;
  const double e = plan.settings.bf16() ? 2 : 4;  // the weights' element
  double us = stream_us(p, "copy", e * n);         // the zeros
  if (how == EmbeddingGrad::dense_main_grad) us += memory_us(p, "residual", (e + 8) * n);
  const WorkItem pass{ItemKind::compute, "embedding_dense_grad", us * p.compute_scale};
  for (auto* list : w.weight_gradient_lists()) {
    if (list->empty()) continue;
    auto at = std::find_if(list->begin(), list->end(),
                           [](const WorkItem& i) { return i.kind == ItemKind::unit_done && i.layer == -1; });
    list->insert(at, pass);
  }
}

// predict.pipeline_messages: DeepSpeed's pipeline engine (runtime/pipe/engine.py) sends a stage's
// output as a PartitionedTensor and keeps only its own part of it; before the backward it gathers
// the whole back over TP (part_output.full(), in _exec_recv_grads or _exec_backward_pass): a gather
// of the message's bytes beside the gradient's own. Before 0.5.4 (is_grad_partitioned = False)
// every TP rank receives the whole gradient, which needs no gather: the list's one gather is then
// the output's (the larger gradient message is pipeline_sim's), so the list stays as it is.
void partition_messages(std::vector<WorkItem>& list, PipelineMessages m) {
  if (m != PipelineMessages::partitioned) return;
  const auto gather = std::find_if(list.begin(), list.end(), [](const WorkItem& i) {
    return i.kind == ItemKind::tp_comm && i.payload == comm::Payload::message;
  });
  if (gather != list.end()) list.insert(gather, *gather);
}

}  // namespace

ChunkWork chunk_work(const MachineProfile& p, const RunPlan& plan, int chunk) {
  ChunkWork w;
  const ChunkLog any = describe_chunk(plan, chunk, false);
  const ChunkLog last = describe_chunk(plan, chunk, true);
  const CallCosts a = call_costs(plan.settings);
  w.forward = work_items(p, any.forward.entries, &w.head_backward, a);
  w.backward = work_items(p, any.backward.entries, nullptr, a);
  w.weight = work_items(p, any.weight.entries, nullptr, a);
  w.backward_last = work_items(p, last.backward.entries, nullptr, a);
  w.weight_last = work_items(p, last.weight.entries, nullptr, a);
  partition_messages(w.backward, plan.settings.predict.pipeline_messages);
  partition_messages(w.backward_last, plan.settings.predict.pipeline_messages);

  const ModelShape& s = plan.shape;
  const int S = int(plan.chunks.size());
  const ChunkSpec c{chunk, S, plan.chunks[chunk].first, plan.chunks[chunk].second};
  if (plan.settings.predict.grad_accumulate != GradAccumulation::fused) {
    // The pass after each micro-batch's backward over the gradient of every parameter tensor the
    // chunk holds (its blocks, the embedding on the first chunk, the final norm and the tied head on
    // the last), one call per tensor as the systems loop over their parameters; where the backward
    // is split (zb-h1) it follows W, which writes the weight gradients.
    const int pp = plan.settings.parallel.pp;
    const bool fp32 = plan.settings.predict.grad_accumulate == GradAccumulation::fp32_pass;
    WorkItem pass{ItemKind::compute, "grad_accumulate"};
    for (const auto& t : rank_params(s, plan.chunks, pp, chunk % pp)) {
      const bool mine = t.layer < 0 ? c.first() || c.last()
                        : t.layer == s.n_layers ? c.last()
                                                : t.layer >= c.first_layer && t.layer < c.first_layer + c.n_layers;
      if (!mine) continue;
      const double n = double(t.local_size(s.tp));
      // fp32_pass: hp.add_(lp.grad.to(fp32)): a widening (2 bytes read, 4 written) and an add (4 + 4
      // read, 4 written); lp_pass: grad += new in bf16 (2 + 2 read, 2 written).
      pass.us += fp32 ? stream_us(p, "convert", 6 * n) + memory_us(p, "residual", 12 * n) : memory_us(p, "residual", 6 * n);
    }
    pass.us *= p.compute_scale;
    for (auto* list : w.weight_gradient_lists())
      if (!list->empty()) list->push_back(pass);
  }
  add_embedding_grad(w, p, plan, c);
  add_bucket_passes(w, p, plan, c);
  add_host_time(w, p, plan.settings, c.n_layers, c.last());
  Flops f;
  for (int l = 0; l < c.n_layers; ++l) f += block_flops(plan.dims);
  if (c.last()) f += head_flops(plan.dims.N(), plan.dims.C, s.vocab_padded / s.tp);
  w.forward_flops = f.forward;
  w.backward_flops = f.backward;
  return w;
}

std::map<int, double> unit_gradient_bytes(const RunPlan& plan, int pp_rank) {
  const RunSettings& cfg = plan.settings;
  const double element = cfg.parallel.grad_reduce_dtype == Precision::bf16 ? 2 : 4;
  std::map<int, double> bytes;
  for (const auto& t : rank_params(plan.shape, plan.chunks, cfg.parallel.pp, pp_rank))
    bytes[t.layer] += element * double(t.local_size(plan.shape.tp));
  return bytes;
}

double compute_us(const std::vector<WorkItem>& items) {
  double t = 0;
  for (const auto& i : items)
    if (i.kind == ItemKind::compute) t += i.us;
  return t;
}

}  // namespace kformer::predict
