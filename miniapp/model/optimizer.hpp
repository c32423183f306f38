// AdamW over a rank's flat parameter buffer, ZeRO-aware: with parallel.zero >= 1 a data-parallel
// rank keeps moments for, and updates, only its shard of each unit (1/dp of it), then the shards
// are all-gathered. Also the global gradient norm (each element counted once over the whole
// mesh) and the warm-up + cosine learning-rate schedule.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "model/param_store.hpp"
#include "adamw_segments.hpp"
#include "sum_of_squares.hpp"

namespace kformer {

struct OptimizerSettings {
  double lr = 3e-4, weight_decay = 0.1;
  int warmup = 0, steps = 1;
  int zero = 0;
};

// Linear warm-up to lr over `warmup` iterations, then cosine decay to lr/10 at `steps`.
double learning_rate(const OptimizerSettings& s, int iteration);

class Optimizer {
 public:
  static constexpr int kNoMirror = -1000;
  // dp: the data-parallel group (shards are its ranks); tp_rank: replicated tensors count once;
  // mirror_layer: a unit this rank holds as a copy of another stage's (the tied embedding on the
  // last pipeline stage), left out of the gradient norm.
  Optimizer(ParamStore& params, const OptimizerSettings& s, comm::Communicator* dp, int tp_rank,
            int mirror_layer = kNoMirror);

  // out(0) = the sum of squares of the gradient elements this rank is responsible for, in double,
  // on the device: one fused reduction over every tensor (sum_of_squares.hpp), no value on the
  // host. The caller sums over the world and takes the root.
  void grad_sq_local(const Exec& exec, const DV<double*>& out) const;
  // One AdamW step of this rank's part (gradients scaled by clip_scale), then, under ZeRO, the
  // all-gather that gives every data-parallel rank the whole updated parameters.
  void step(int iteration, double clip_scale);

  double learning_rate(int iteration) const { return kformer::learning_rate(s_, iteration); }
  const OptimizerSettings& settings() const { return s_; }
  std::int64_t state_elements() const { return state_size_; }  // moments held: 2 per element

  struct Segment {  // a run of elements of one tensor that this rank updates
    std::size_t unit, slot;
    std::int64_t shard_offset;  // into the unit's shard of values (and of gradients)
    std::int64_t grad_offset;   // its place in the flat (unsharded) layout
    std::int64_t state_offset, length;
    bool decay, replicated, mirror;
  };
  // What the checkpoints read and write: the segments and the two moments (state_elements() each).
  const std::vector<Segment>& segments() const { return segments_; }
  DV<float*> first_moment() const { return m_; }
  DV<float*> second_moment() const { return v_; }

 private:
  ParamStore& p_;
  OptimizerSettings s_;
  comm::Communicator* dp_;
  int tp_rank_;
  std::vector<Segment> segments_;
  std::int64_t state_size_ = 0;
  DV<float*> m_, v_;
  std::unique_ptr<kernels::SumOfSquares<Exec>> grad_sq_;  // over the ranges this rank counts
  std::unique_ptr<kernels::AdamWSegments<Exec>> adamw_;   // every segment, one launch a step
};

}  // namespace kformer
