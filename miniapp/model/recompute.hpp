// Activation recomputation (train.recompute): what a chunk keeps of each block's forward for its
// backward, and what it recomputes there. none: everything. selective (Megatron-LM's): all but
// the naive attention's probabilities (B,Hl,T,T), recomputed from the kept QKV right before the
// block's backward (the fused attention keeps only its row statistics and recomputes scores in
// every backward, so there selective keeps what none keeps). full: only each block's output
// (the next block's input); the block's forward re-runs into one stage-wide set of buffers right
// before its backward; with train.recompute_layers=N only the chunk's first N blocks do, the
// others keeping everything (Megatron-LM's block method; torchtitan's selective layer policy
// costs the same with N = half the blocks). The extra forward work is counted apart (hardware vs
// model FLOPs). op (torchtitan's selective op policy, llama blocks; recompute_op.cpp): each block
// keeps its output, Q and V, its attention's output and state and the gate's output (the outputs of
// wq, wv, the attention and w1, where torchtitan also keeps w2's, which no backward reads) and re-runs
// its norms, K with its RoPE, the output projection, the residual, up and SwiGLU into the stage's
// shared buffers before its backward.
#pragma once

#include "settings/choices.hpp"  // enum class Recompute
