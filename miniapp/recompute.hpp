// Activation recomputation (train.recompute): what a chunk keeps of each block's forward for its
// backward, and what it recomputes there. none: everything. selective (Megatron-LM's): all but
// the naive attention's probabilities (B,Hl,T,T), recomputed from the kept QKV right before the
// block's backward (the fused attention keeps only its row statistics and recomputes scores in
// every backward, so there selective keeps what none keeps). full: only each block's output
// (the next block's input); the block's forward re-runs into one stage-wide set of buffers right
// before its backward. The extra forward work is counted apart (hardware vs model FLOPs).
#pragma once

#include <stdexcept>
#include <string>

namespace kformer {

enum class Recompute { none, selective, full };

// "none", "selective" or "full" (inline: the memory estimate and the deck fuzzer use it without
// the stage code).
inline Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  throw std::invalid_argument("train.recompute=" + name + " is not one of none, selective, full");
}

}  // namespace kformer
