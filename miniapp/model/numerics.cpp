// A run's numerics, resolved once (see numerics.hpp).
#include "model/numerics.hpp"

namespace kformer {

Numerics resolve_numerics(Precision precision, Precision grad_reduce, int zero, int dp, ScheduleKind schedule) {
  Numerics n;
  n.activations = precision;
  n.zero = zero;
  const bool sharded = zero >= 1 && dp > 1;
  n.shards = sharded ? dp : 1;
  n.shards_values = sharded && zero >= 3;
  n.shards_grads = n.shards_values && schedule != ScheduleKind::zb_h1;
  n.shards_masters = sharded && zero <= 2 && precision == Precision::bf16;
  n.reduction = dp > 1 ? grad_reduce : Precision::fp32;
  n.gradients = n.bf16_reduce() && !n.shards_grads && schedule != ScheduleKind::zb_h1 ? Precision::bf16 : Precision::fp32;
  return n;
}

}  // namespace kformer
