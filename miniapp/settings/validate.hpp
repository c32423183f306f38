// Checks that need several keys at once (shapes that divide, a layout that fits the job, products
// of sizes that must not overflow) and derives the keys left at 0 (parallel.dp,
// parallel.microbatches, model.n_kv_heads, model.ffn_dim) or auto (comm.backend). Runs before
// anything is allocated; throws ConfigError naming the key and the fix. Needs no Kokkos or MPI, so
// the deck fuzzer (tests/fuzz) runs it as it is. Whether the layout fits in memory is the run
// plan's check (plan/run_plan.hpp), made on its one estimate.
#pragma once

#include "settings/config.hpp"

namespace kformer {

void resolve_and_validate(Config& cfg, int world_size);

}  // namespace kformer
