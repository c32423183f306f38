// The whole run plan and its memory checks (see make_plan.hpp).
#include "train/make_plan.hpp"

#include <sstream>
#include <utility>

#include "platform/errors.hpp"

namespace kformer {

RunPlan make_plan(RunSettings settings) { return with_memory(plan_without_memory(std::move(settings))); }

RunPlan with_memory(RunPlan plan) {
  plan.memory = estimate_memory(plan);
  return plan;
}

RunPlan with_attention(RunPlan plan, AttentionKind kind) {
  if (plan.attention == kind) return plan;
  plan.attention = kind;
  return with_memory(std::move(plan));
}

namespace {

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

}  // namespace

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
