// Attention kernels timed on this execution space: which kinds this build can run in a precision,
// one kind's forward and backward at a block's shape (what kformer calibrate records), and the
// start-up rates and agreement that kernels.attention=auto compares (attention_choice.hpp).
#pragma once

#include <string>
#include <vector>

#include "measure/attention_choice.hpp"
#include "model/block_dims.hpp"

namespace kformer {

// The kinds built and valid in `precision` on the run's execution space, in the enum's order:
// naive and fused always, batched_gemm with a vendor BLAS, vendor (cuDNN) in bf16 under CUDA with
// cuDNN built and its library found at run time.
std::vector<AttentionKind> attention_kinds_built(Precision precision);
// Whether this build has kernels.attention=vendor (cuDNN under CUDA); callable before Kokkos starts.
bool attention_vendor_built();

struct AttentionTiming {
  double forward_us = 0, backward_us = 0;
};
// One kind at d's shape (B sequences of T tokens, the rank's Hl query and KVl key/value heads) with
// activations in `precision`. `window_ms`: each direction is repeated until that much time has
// passed (at least three calls after a warm-up), and the mean taken.
AttentionTiming time_attention(const BlockDims& d, AttentionKind kind, Precision precision, double window_ms);

// The start-up shape: the run's own call (its micro-batch of sequences, the rank's heads, its
// length), cut to keep one forward and backward within `flop_budget`: first fewer sequences (down to
// one), then fewer heads (whole key/value groups, at least one), then the sequence halved. A GPU's
// budget keeps a small model's whole call, so that a kernel that fills the device by batch and heads
// (the fused kernels' teams are tiles of a sequence's head: one sequence of GPT-2's 12 heads at T 1024
// is 384, under half what an H100 holds at once) is timed as full as the step runs it; on the host
// rates per head and sequence barely depend on their count. The shape is reported with the choice.
BlockDims startup_attention_shape(const BlockDims& run, double flop_budget);
std::string describe_shape(const BlockDims& d);  // "B=8 T=1024 heads=4/4 hd=64"

// What auto compares: TFLOP/s of forward + backward for each candidate at `d` (0 for kinds not in
// `candidates`), and how far each one's results lie from the nearest other candidate's there (every
// kind reads the same inputs; attention_choice.hpp's AttentionDiffs).
struct AttentionTrial {
  AttentionRates tflops{};
  AttentionDiffs diffs{};
};
AttentionTrial measure_attention_candidates(const BlockDims& d, Precision precision,
                                            const std::vector<AttentionKind>& candidates);

}  // namespace kformer
