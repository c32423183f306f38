// A rank's model from the plan (see rank_model.hpp).
#include "train/rank_model.hpp"

namespace kformer {

std::unique_ptr<RankModel> build_rank_model(const RunPlan& plan, RankPlace at, RankGroups groups) {
  const RunSettings& cfg = plan.settings;
  const ModelShape& shape = plan.shape;
  const int pp = cfg.parallel.pp;
  const auto& chunks = plan.chunks;
  const bool bf16 = cfg.bf16();
  auto model = std::make_unique<RankModel>();
  RankModel& m = *model;
  m.params = std::make_unique<ParamStore>(rank_params(shape, chunks, pp, at.pp), shape.tp, at.tp, groups.dp,
                                          plan.numerics);
  const KernelChoice k{plan.gemm, plan.attention, bf16};
  const int S = static_cast<int>(chunks.size());
  for (int c = at.pp; c < S; c += pp) {
    m.stages.push_back(std::make_unique<Stage>(shape, cfg.train.micro_batch, cfg.train.seq_len, k, *m.params,
                                               groups.tp, ChunkSpec{c, S, chunks[c].first, chunks[c].second}));
    m.stages.back()->set_recompute(cfg.train.recompute, cfg.train.full_recompute_blocks(chunks[c].second));
    m.stages.back()->set_split_backward(splits_backward(cfg.parallel.schedule));
    m.stages.back()->set_phase_timing(cfg.output.phase_timing);
  }
  m.pipeline = std::make_unique<Pipeline>(m.stages, plan.schedule[at.pp], groups.pp);
  return model;
}

}  // namespace kformer
