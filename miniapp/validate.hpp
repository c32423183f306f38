// Checks that need several keys at once (shapes that divide, a layout that fits the job, products
// of sizes that must not overflow, a memory estimate within memory.limit_gb or, without one, within
// this machine's memory) and derives the keys left at 0 (parallel.dp, parallel.microbatches,
// model.n_kv_heads, model.ffn_dim). Runs before anything is allocated; throws ConfigError naming
// the key and the fix. Needs no Kokkos or MPI, so the deck fuzzer (tests/fuzz) runs it as it is.
#pragma once

#include "config.hpp"

namespace kformer {

void resolve_and_validate(Config& cfg, int world_size);

}  // namespace kformer
