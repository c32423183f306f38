// Where a rank's parameters and AdamW moments lie in the layout-independent checkpoint tensors.
// A rank's optimizer segments (runs of one tensor's local TP block that it updates: all of them,
// or its ZeRO shard of each unit) are cut into pieces that are contiguous in the full row-major
// tensor; each rank writes and reads only those pieces, at computed offsets, so no rank ever
// holds more than its own part of the model.
//
// Of the copies of an element that ranks hold, exactly one is "owned" (written at save, counted in
// the checksum at load): data-parallel rank 0's without ZeRO, a TP-replicated tensor's on TP rank
// 0, never the tied embedding's copy on the last pipeline stage. Every rank reads all it holds.
#pragma once

#include <cstdint>
#include <vector>

#include "model/optimizer.hpp"
#include "model/param_store.hpp"

namespace kformer {

struct SlicePiece {
  std::int64_t index = 0;   // first element in the full tensor (row-major, real rows only)
  std::int64_t length = 0;  // elements
  std::int64_t at = 0;      // first element within the run
};

struct SliceRun {
  const ParamSlot* slot = nullptr;  // the tensor
  float* values = nullptr;          // device: the run's parameter values in this rank's store
  std::int64_t state_offset = 0;    // into the optimizer's moments
  std::int64_t length = 0;
  bool owned = false;
  std::vector<SlicePiece> pieces;  // in order, coalesced; rows past the real vocabulary left out
};

// The run's elements of checkpoint part 0 (values), 1 (exp_avg) or 2 (exp_avg_sq), on the device.
float* part_data(const SliceRun& run, const Optimizer& optimizer, int part);

std::vector<SliceRun> checkpoint_slices(const ParamStore& params, const Optimizer& optimizer, int tp_rank,
                                        int dp_rank);

}  // namespace kformer
