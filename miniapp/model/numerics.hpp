// How a run holds and moves its numbers, resolved once from its settings (make_plan puts it in
// the plan): the element type of the activations, of the gradient buffer, of what the
// data-parallel reduction moves and of the optimizer's masters, and what ZeRO shards over the
// data-parallel group. The parameter store, the gradient sync, the memory estimate and predict
// read these fields; none derives them again from the deck's keys.
#pragma once

#include "settings/choices.hpp"

namespace kformer {

struct Numerics {
  Precision activations = Precision::fp32;  // train.precision: the GEMMs' inputs, the kept activations
  Precision gradients = Precision::fp32;    // the gradient buffer the backward adds into
  Precision reduction = Precision::fp32;    // what the data-parallel buckets move (fp32 over dp = 1)
  Precision masters = Precision::fp32;      // the optimizer's parameters and moments: always fp32
  int zero = 0;                             // parallel.zero
  int shards = 1;                           // the data-parallel group when ZeRO >= 1 shards over it, else 1
  bool shards_values = false;   // ZeRO-3 over dp > 1: each rank holds 1/dp of each unit, gathered before use
  // ZeRO-3 reduce-scatters gradients unit by unit as each backward ends; not under zb-h1, whose
  // deferred W keeps every unit's gradient open across the micro-batches in flight.
  bool shards_grads = false;
  // bf16 under ZeRO-1/2 over dp > 1: the whole model kept in bf16, the fp32 masters sharded with the moments.
  bool shards_masters = false;

  bool bf16() const { return activations == Precision::bf16; }
  // The gradients are one bf16 buffer: a bf16 reduction over dp > 1, unless ZeRO-3 shards them
  // (their reduce-scatters travel in bf16 from fp32 unit buffers) or zb-h1 defers the weight
  // gradients out of the units' backward (fp32, with a bf16 copy that travels).
  bool bf16_grads() const { return gradients == Precision::bf16; }
  bool bf16_reduce() const { return reduction == Precision::bf16; }
};

// precision: train.precision; grad_reduce: parallel.grad_reduce_dtype; dp: the data-parallel size.
Numerics resolve_numerics(Precision precision, Precision grad_reduce, int zero, int dp, ScheduleKind schedule);

}  // namespace kformer
