// Checks that need several keys at once (shapes that divide, a layout that fits the job) and
// derives the keys left at 0 (parallel.dp, parallel.microbatches, model.n_kv_heads, model.ffn_dim).
// Runs before anything is allocated; throws ConfigError naming the key and the fix.
#pragma once

#include "config.hpp"

namespace kformer {

void resolve_and_validate(Config& cfg, int world_size);

}  // namespace kformer
