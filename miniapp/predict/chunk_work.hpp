// What one model chunk does for one micro-batch, in the order Stage and Block do it: kernel
// calls with their cost on a machine profile, the tensor-parallel all-reduces between them, the
// ZeRO-3 gathers (require) before a unit's parameters are read, and the points where a unit's
// gradient is complete (for the data-parallel buckets of the last micro-batch). The simulator
// walks these lists; the head's loss and backward, which Stage runs at the end of the forward
// call, is a list of its own so that it is counted as backward.
#pragma once

#include <string>
#include <vector>

#include "model/block.hpp"
#include "predict/machine_profile.hpp"
#include "model/stage.hpp"

namespace kformer::predict {

enum class ItemKind { compute, tp_allreduce, require, unit_done };

struct WorkItem {
  ItemKind kind;
  std::string name;  // the kernel (compute)
  double us = 0;     // compute: modelled time
  double bytes = 0;  // tp_allreduce: the buffer's bytes
  int layer = 0;     // require, unit_done: the unit (-1 embedding, L final norm and head)
};

struct ChunkWork {
  // split_backward (zb-h1): `backward` is B, the input gradients, and `weight` is W, the weight
  // gradients' halves of the backward GEMMs, the embedding's scatter and the units' completion.
  std::vector<WorkItem> forward, head_backward, backward, weight;
  double forward_flops = 0, backward_flops = 0;
};

ChunkWork chunk_work(const MachineProfile& p, const ModelShape& s, const BlockDims& d, const ChunkSpec& c,
                     const std::string& attention, bool gpt_tied_copy_on_last, bool split_backward = false);

// Sum of the compute items' times of a list.
double compute_us(const std::vector<WorkItem>& items);

}  // namespace kformer::predict
