// The memory estimate per rank, from the step's own description (step_work.hpp): each pipeline
// stage's first rank is built as the trainer builds it and walked through one whole iteration,
// described; every buffer it makes then (scratch(), device_buffer(): all of a step's buffers are
// made in its first iteration and kept) is counted by the kind of the scope that made it
// (platform/described_memory.hpp), and every buffer a kernel keeps between calls at the most any
// call asks of it (KeptBuffer, kernels/call_record.hpp). Nothing here mirrors an allocation.
#pragma once

#include "plan/memory.hpp"
#include "plan/run_plan.hpp"

namespace kformer {

// The largest rank of the layout (the first pipeline stage holds the embedding, the last the
// head); activations_most, the most activations of any stage.
MemoryEstimate estimate_memory(const RunPlan& plan);

}  // namespace kformer
