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

// The start-up shape: one sequence of the run's length, with as few of the rank's heads (whole
// key/value groups, at least one) as keep one forward and backward within `flop_budget`, and the
// sequence halved only where one group still exceeds it. Rates per head barely depend on the head
// count once a GPU is full, and on the host not at all; the shape is reported with the choice.
BlockDims startup_attention_shape(const BlockDims& run, double flop_budget);
std::string describe_shape(const BlockDims& d);  // "T=1024 heads=4/4 hd=64"

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
