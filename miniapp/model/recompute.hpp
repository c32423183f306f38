// Activation recomputation (train.recompute): what a chunk keeps of each block's forward for its
// backward, and what it recomputes there. none: everything. selective (Megatron-LM's): all but
// the naive attention's probabilities (B,Hl,T,T), recomputed from the kept QKV right before the
// block's backward (the fused attention keeps only its row statistics and recomputes scores in
// every backward, so there selective keeps what none keeps). full: only each block's output
// (the next block's input); the block's forward re-runs into one stage-wide set of buffers right
// before its backward; with train.recompute_layers=N only the chunk's first N blocks do, the
// others keeping everything (Megatron-LM's block method; torchtitan's selective layer policy
// costs the same with N = half the blocks). The extra forward work is counted apart (hardware vs
// model FLOPs).
#pragma once

#include "settings/choices.hpp"  // enum class Recompute
