// A rank's checkpoint pieces (see checkpoint_slices.hpp).
#include "checkpoint/checkpoint_slices.hpp"

#include <algorithm>

namespace kformer {

float* part_data(const SliceRun& run, const Optimizer& optimizer, int part) {
  if (part == 0) return run.values;
  return (part == 1 ? optimizer.first_moment() : optimizer.second_moment()).data() + run.state_offset;
}

std::vector<SliceRun> checkpoint_slices(const ParamStore& params, const Optimizer& optimizer, int tp_rank,
                                        int dp_rank) {
  std::vector<SliceRun> runs;
  const bool dp_copy = params.shards() == 1 && dp_rank != 0;  // no ZeRO: dp rank 0 speaks for all
  for (const auto& seg : optimizer.segments()) {
    const ParamSlot& slot = params.slots()[seg.slot];
    SliceRun run;
    run.slot = &slot;
    run.values = params.shard_values(seg.unit) + seg.shard_offset;
    run.state_offset = seg.state_offset;
    run.length = seg.length;
    run.owned = !dp_copy && !seg.mirror && !(seg.replicated && tp_rank != 0);
    const std::int64_t lc = slot.cols, first = seg.grad_offset - slot.offset;  // in the local block
    for (std::int64_t k = first; k < first + seg.length;) {
      const std::int64_t r = k / lc, c = k % lc, n = std::min(lc - c, first + seg.length - k);
      const std::int64_t row = slot.row0 + r;
      if (row < slot.spec.real_rows) {
        const SlicePiece p{row * slot.spec.cols + slot.col0 + c, n, k - first};
        if (!run.pieces.empty() && run.pieces.back().index + run.pieces.back().length == p.index &&
            run.pieces.back().at + run.pieces.back().length == p.at)
          run.pieces.back().length += n;
        else
          run.pieces.push_back(p);
      }
      k += n;
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace kformer
