// The run plan (see run_plan.hpp).
#include "plan/run_plan.hpp"


namespace kformer {

RunPlan plan_without_memory(RunSettings settings) {
  RunPlan p;
  p.settings = std::move(settings);
  const RunSettings& s = p.settings;
  p.shape = model_shape(s);
  p.dims = block_dims(p.shape, s.train.micro_batch, s.train.seq_len);
  p.chunks = chunk_layers(s);
  p.numerics = resolve_numerics(s.train.precision, s.parallel.grad_reduce_dtype, s.parallel.zero, s.parallel.dp,
                                s.parallel.schedule);
  p.schedule = make_schedule(s.parallel.schedule, s.parallel.pp, s.parallel.microbatches, s.parallel.virtual_stages);
  p.gemm = s.kernels.gemm == GemmSetting::vendor ? kernels::GemmImpl::vendor : kernels::GemmImpl::native;
  p.attention = s.kernels.attention == AttentionSetting::automatic ? AttentionKind::fused
                                                                    : fixed_attention(s.kernels.attention);
  return p;
}

RunPlan with_gemm(RunPlan plan, kernels::GemmImpl impl) {
  plan.gemm = impl;
  return plan;
}

int fully_recomputed_layers(const RunPlan& plan) {
  int n = 0;
  for (const auto& chunk : plan.chunks) n += plan.settings.train.full_recompute_blocks(chunk.second);
  return n;
}

}  // namespace kformer
