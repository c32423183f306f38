// What one model chunk does for one micro-batch, as predict's simulator walks it: the chunk's
// calls described by the code the trainer runs (train/step_work.hpp), each kernel at its cost on
// a machine profile (kernel_costs.hpp), the tensor-parallel calls as blocking calls on the TP
// group, ZeRO-3's "require" before a unit's parameters are read and the points where a unit's
// gradient is complete (the data-parallel buckets; under ZeRO-3 each gradient reduce-scatter).
// The rest of the data-parallel and the pipeline traffic the list holds is the simulator's own
// to place (pipeline_sim.hpp, step_sim.hpp), as is whether a require gathers. The head's
// loss and backward, which the last chunk runs at the end of its forward call, is a list of its
// own so that it is counted as backward.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "plan/run_plan.hpp"
#include "predict/machine_profile.hpp"
#include "train/step_work.hpp"

namespace kformer::predict {

// require: us is what a miss computes besides the gather (bf16: widening the gathered unit's
// vectors; with predict.gather_copy=copy_out, FSDP2's copy of the gathered bytes);
// grad_scatter: ZeRO-3's reduce-scatter of a unit's gradient, posted as a data-parallel bucket (with
// predict.scatter_copy=copy_in, after a compute item: FSDP2's copy of the gradients into its input).
enum class ItemKind { compute, tp_comm, require, unit_done, grad_scatter };

struct WorkItem {
  ItemKind kind;
  std::string name;  // the kernel (compute), the call (tp_comm)
  double us = 0;     // compute: modelled time; unit_done: the pass over its bucket before it is posted
  double bytes = 0;  // tp_comm, grad_scatter: nccl-tests' size; require: its gather's, where it gathers
  int layer = 0;     // require, unit_done: the unit (-1 embedding, L final norm and head)
  comm::OpKind op = comm::OpKind::allreduce;  // tp_comm
  comm::Payload payload = comm::Payload::other;  // tp_comm: what it carries
  double half_us = 0;  // compute: a backward GEMM running both products, one product's time (else 0)
  std::string family;  // compute: the kernel's family (kernels/call_record.hpp); empty: `name` says it
};

// How the costed software runs the calls kformer describes, where it differs from kformer (the
// predict.* keys a system sets): whose attention kernels, dropout on their probabilities, the
// type of the TP collectives that carry activations, and a copy after each ZeRO-3 gather.
struct CallCosts {
  AttentionModel attention = AttentionModel::kformer;
  double attention_dropout = 0;  // batched_gemm attention only
  bool tp_halved = false;        // a bf16 run's fp32 TP collectives of activations moved in bf16
  bool copy_out = false;         // predict.gather_copy=copy_out: a gather's bytes read and written again
  // predict.scatter_copy=copy_in: the bytes of an unsharded gradient's element as autograd leaves it
  // (2 in a bf16 run), copied into the reduce-scatter's input; 0: no copy
  double copy_in_grad_bytes = 0;
  bool eager_rmsnorm = false;    // predict.rmsnorm=eager: an RMSNorm as eager PyTorch's operators
  bool eager_pointwise = false;  // predict.pointwise=eager: RoPE, repeated K/V heads, SwiGLU as the same
  LossKernels loss = LossKernels::fused;  // predict.loss: whose operators the loss's passes cost
  bool eager_op_rerun = false;   // eager pointwise under train.recompute=op: Q's RoPE and repeat_kv re-run
  ResidualStream residual = ResidualStream::fp32;  // predict.residual in a bf16 run (fp32: kformer's own bytes)
  // predict.logits=gathered under TP: the loss's passes over tp times the rank's share of the logits,
  // after an all-gather of them in logit_bytes an element (the run's precision)
  int logits_tp = 1;
  double logit_bytes = 4;
  bool train_metrics = false;  // predict.train_metrics=composer_lm: after the loss's last pass

  explicit CallCosts(AttentionModel a = AttentionModel::kformer, double dropout = 0, bool halved = false,
                     bool copied = false)
      : attention(a), attention_dropout(dropout), tp_halved(halved), copy_out(copied) {}
};
CallCosts call_costs(const RunSettings& s);

struct ChunkWork {
  // split_backward (zb-h1): `backward` is B, the input gradients, and `weight` is W, the weight
  // gradients' halves of the backward GEMMs, the embedding's scatter and the units' completion.
  std::vector<WorkItem> forward, head_backward, backward, weight;
  // The same on the iteration's last micro-batch, where units are marked done (empty: as above).
  std::vector<WorkItem> backward_last, weight_last;
  double forward_flops = 0, backward_flops = 0;
  const std::vector<WorkItem>& backward_of(bool weight_call, bool last_micro) const {
    const auto& last = weight_call ? weight_last : backward_last;
    return last_micro && !last.empty() ? last : weight_call ? weight : backward;
  }
  // The lists that write the weight gradients, every micro-batch's and the last's: W's where the
  // backward is split (zb-h1), else the whole backward's.
  std::vector<std::vector<WorkItem>*> weight_gradient_lists() {
    if (!weight.empty()) return {&weight, &weight_last};
    return {&backward, &backward_last};
  }
};

// Global chunk `chunk` of the plan, on pipeline rank chunk % pp.
ChunkWork chunk_work(const MachineProfile& p, const RunPlan& plan, int chunk);

// A described list as items: kernels costed on `p`, TP calls, requires and units done. With
// `head`, what runs inside the region kformer::head_backward goes there instead.
std::vector<WorkItem> work_items(const MachineProfile& p, const std::vector<WorkEntry>& entries,
                                 std::vector<WorkItem>* head = nullptr, const CallCosts& costs = CallCosts());

// A described kernel call's modelled time on `p` (before the profile's compute_scale); its
// attention as `costs.attention`'s kernels run it (predict.attention).
double kernel_us(const MachineProfile& p, const kernels::KernelCall& call, const CallCosts& costs = CallCosts());

// Sum of the compute items' times of a list.
double compute_us(const std::vector<WorkItem>& items);

// The bytes of each unit's gradient buffer on pipeline rank `pp_rank` (unit: -1 embedding, 0..L-1
// blocks, L final norm and head), as the costed data-parallel wrapper keeps it: its TP share of
// the unit's parameters in parallel.grad_reduce_dtype's element (fp32, or 16 bits for an fp16
// run's buffer): what predict.bucket_pass reads and writes.
std::map<int, double> unit_gradient_bytes(const RunPlan& plan, int pp_rank);

}  // namespace kformer::predict
