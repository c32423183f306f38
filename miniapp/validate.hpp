// Checks that need several keys at once (shapes that divide, a layout that fits the job, products
// of sizes that must not overflow, a memory estimate within memory.limit_gb or, without one, within
// the rank's share of the node's memory) and derives the keys left at 0 (parallel.dp, parallel.microbatches,
// model.n_kv_heads, model.ffn_dim) or auto (comm.backend). Runs before anything is allocated; throws ConfigError naming
// the key and the fix. Needs no Kokkos or MPI, so the deck fuzzer (tests/fuzz) runs it as it is.
#pragma once

#include "config.hpp"
#include "node_memory.hpp"

namespace kformer {

// `node`: the memory the ranks of this node share (by default this node with one rank on it).
void resolve_and_validate(Config& cfg, int world_size, const NodeMemory& node = probe_node_memory(1));

}  // namespace kformer
