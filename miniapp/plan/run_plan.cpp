// The run plan (see run_plan.hpp).
#include "plan/run_plan.hpp"

#include <sstream>

#include "model/param_store.hpp"

namespace kformer {

RunPlan make_plan(RunSettings settings) {
  RunPlan p;
  p.settings = std::move(settings);
  const RunSettings& s = p.settings;
  p.shape = model_shape(s);
  p.dims = block_dims(p.shape, s.train.micro_batch, s.train.seq_len);
  p.chunks = chunk_layers(s);
  p.numerics = resolve_numerics(s.train.precision, s.parallel.grad_reduce_dtype, s.parallel.zero, s.parallel.dp,
                                s.parallel.schedule);
  p.schedule = make_schedule(s.parallel.schedule, s.parallel.pp, s.parallel.microbatches, s.parallel.virtual_stages);
  p.gemm = s.kernels.gemm == GemmSetting::vendor ? kernels::GemmImpl::vendor : kernels::GemmImpl::native;
  p.attention = s.kernels.attention == AttentionSetting::automatic ? AttentionKind::fused
                                                                    : fixed_attention(s.kernels.attention);
  p.memory = estimate_memory(p);
  return p;
}

RunPlan with_attention(RunPlan plan, AttentionKind kind) {
  if (plan.attention == kind) return plan;
  plan.attention = kind;
  plan.memory = estimate_memory(plan);
  return plan;
}

RunPlan with_gemm(RunPlan plan, kernels::GemmImpl impl) {
  plan.gemm = impl;
  return plan;
}

// With memory.limit_gb unset the node's memory, shared by its ranks, is the limit: a layout bigger
// than that would only fail later, in the middle of allocating (or be killed by the kernel's or
// the batch system's out-of-memory killer), with no clear line.
void check_plan_fits(const RunPlan& plan, const NodeMemory& node) {
  check_memory_limit(plan.settings, plan.memory);
  if (node.bytes <= 0) return;
  std::ostringstream what;
  what.precision(3);
  what << "per rank of this node (" << node.bytes / 1e9 << " GB " << node.source << " / " << node.ranks
       << (node.ranks == 1 ? " rank)" : " ranks)");
  check_estimate_fits(plan.settings, plan.memory, node.per_rank(), what.str(),
                      "start fewer ranks per node, or set memory.limit_gb to the memory per rank of the machine "
                      "you plan for");
}

}  // namespace kformer
