// The whole run plan (plan/run_plan.hpp) with its memory estimate per rank, which comes from
// describing one iteration of the plan's largest rank of each pipeline stage
// (memory_estimate.hpp), and the checks of that estimate against the memory a rank has. Describing
// a step builds the model's objects on the execution space: Kokkos must be initialised (nothing is
// launched or allocated).
#pragma once

#include "plan/run_plan.hpp"
#include "platform/node_memory.hpp"
#include "train/memory_estimate.hpp"

namespace kformer {

// Throws std::invalid_argument for settings validation would have refused (a schedule that
// cannot take the micro-batches).
RunPlan make_plan(RunSettings settings);
// `plan` (plan_without_memory's) with its memory estimate. Needs Kokkos initialised.
RunPlan with_memory(RunPlan plan);

// The plan with another attention kernel, and the memory estimate that kernel gives.
RunPlan with_attention(RunPlan plan, AttentionKind kind);

// The plan's estimate against memory.limit_gb (naming the largest train.micro_batch that would
// fit, or what to change when none does), or with none against the share of `node`'s memory each
// of its ranks can count on. Throws ConfigError naming the fix.
void check_plan_fits(const RunPlan& plan, const NodeMemory& node);

}  // namespace kformer
