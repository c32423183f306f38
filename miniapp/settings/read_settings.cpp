// Config -> RunSettings (see read_settings.hpp).
#include "settings/read_settings.hpp"

#include <utility>

#include "platform/errors.hpp"
#include "settings/validate.hpp"

namespace kformer {
namespace {

template <class E>
E choice(const Config& cfg, const char* key) {
  try {
    return parse_choice<E>(cfg.str(key));
  } catch (const std::invalid_argument& e) {  // the schema and choices.hpp disagree: kformer's bug
    throw std::logic_error(std::string(key) + ": " + e.what() + " (schema.cpp and settings/choices.hpp differ)");
  }
}

bool flag(const Config& cfg, const char* key) { return cfg.str(key) == "true"; }

}  // namespace

RunSettings read_settings(const Config& cfg) {
  RunSettings s;
  ModelSettings& m = s.model;
  TrainSettings& t = s.train;
  ParallelSettings& p = s.parallel;
  CommSettings& c = s.comm;
  OutputSettings& o = s.output;
  // Integers kept in an int (validation bounds them), reals and texts, key by key.
  const std::pair<const char*, int*> ints[] = {
      {"model.n_layers", &m.n_layers}, {"model.d_model", &m.d_model}, {"model.n_heads", &m.n_heads},
      {"model.n_kv_heads", &m.n_kv_heads}, {"model.ffn_dim", &m.ffn_dim}, {"model.vocab_size", &m.vocab_size},
      {"model.max_seq_len", &m.max_seq_len}, {"train.steps", &t.steps}, {"train.global_batch", &t.global_batch},
      {"train.micro_batch", &t.micro_batch}, {"train.seq_len", &t.seq_len}, {"train.warmup", &t.warmup},
      {"train.max_nan", &t.max_nan}, {"train.stop_at", &t.stop_at}, {"train.recompute_layers", &t.recompute_layers}, {"parallel.tp", &p.tp}, {"parallel.pp", &p.pp},
      {"parallel.dp", &p.dp}, {"parallel.zero", &p.zero}, {"parallel.microbatches", &p.microbatches},
      {"parallel.virtual_stages", &p.virtual_stages}, {"checkpoint.every", &s.checkpoint.every},
      {"output.log_every", &o.log_every}, {"straggler.rank", &s.straggler.rank}};
  for (const auto& [key, field] : ints) *field = cfg.i32(key);
  const std::pair<const char*, double*> reals[] = {
      {"train.lr", &t.lr}, {"train.weight_decay", &t.weight_decay}, {"train.grad_clip", &t.grad_clip},
      {"comm.emulate.latency_us", &c.latency_us}, {"comm.emulate.bandwidth_gbps", &c.bandwidth_gbps},
      {"comm.timeout_s", &c.timeout_s}, {"output.peak_tflops", &o.peak_tflops},
      {"straggler.slowdown", &s.straggler.slowdown}, {"memory.limit_gb", &s.memory_limit_gb}};
  for (const auto& [key, field] : reals) *field = cfg.f64(key);
  const std::pair<const char*, std::string*> texts[] = {
      {"comm.backend", &c.backend}, {"checkpoint.save", &s.checkpoint.save}, {"checkpoint.load", &s.checkpoint.load},
      {"output.json", &o.json}, {"output.trace", &o.trace}, {"output.export", &o.export_dir},
      {"predict.machine", &s.predict.machine}, {"data.source", &s.data_source}};
  for (const auto& [key, field] : texts) *field = cfg.str(key);

  m.family = choice<Family>(cfg, "model.family");
  t.seed = static_cast<std::uint64_t>(cfg.i64("train.seed"));
  t.precision = choice<Precision>(cfg, "train.precision");
  t.recompute = choice<Recompute>(cfg, "train.recompute");
  p.grad_reduce_dtype = choice<Precision>(cfg, "parallel.grad_reduce_dtype");
  p.schedule = choice<ScheduleKind>(cfg, "parallel.schedule");
  p.sequence_parallel = flag(cfg, "parallel.sequence_parallel");
  for (std::int64_t n : cfg.ints("parallel.stage_layers")) p.stage_layers.push_back(static_cast<int>(n));
  c.auto_reason = cfg.auto_reason("comm.backend");
  c.strict = flag(cfg, "comm.strict");
  s.kernels.gemm = choice<GemmSetting>(cfg, "kernels.gemm");
  s.kernels.attention = choice<AttentionSetting>(cfg, "kernels.attention");
  o.phase_timing = flag(cfg, "output.phase_timing");
  o.kernel_times = flag(cfg, "output.kernel_times");
  s.calibrate.agreement = cfg.f64("calibrate.agreement");
  s.calibrate.max_repeats = cfg.i32("calibrate.max_repeats");
  s.predict.world = cfg.i64("predict.world");
  s.predict.system = cfg.str("predict.system");
  s.predict.attention = choice<AttentionModel>(cfg, "predict.attention");
  s.predict.pipeline_p2p = choice<PipelineP2p>(cfg, "predict.pipeline_p2p");
  s.predict.grad_reduce = choice<GradReduce>(cfg, "predict.grad_reduce");
  s.predict.tp_comm = choice<Overlap>(cfg, "predict.tp_comm");
  s.predict.tp_input_grad = choice<Overlap>(cfg, "predict.tp_input_grad");
  s.predict.tp_precision = choice<TpPrecision>(cfg, "predict.tp_precision");
  s.predict.attention_dropout = cfg.f64("predict.attention_dropout");
  s.predict.param_gather = choice<Overlap>(cfg, "predict.param_gather");
  s.predict.gather_copy = choice<GatherCopy>(cfg, "predict.gather_copy");
  s.predict.scatter_copy = choice<ScatterCopy>(cfg, "predict.scatter_copy");
  s.predict.zero3_gather = choice<Overlap>(cfg, "predict.zero3_gather");
  s.predict.pipeline_messages = choice<PipelineMessages>(cfg, "predict.pipeline_messages");
  s.predict.pipeline_calls = choice<PipelineCalls>(cfg, "predict.pipeline_calls");
  s.predict.residual = choice<ResidualStream>(cfg, "predict.residual");
  s.predict.rmsnorm = choice<Fusion>(cfg, "predict.rmsnorm");
  s.predict.pointwise = choice<Fusion>(cfg, "predict.pointwise");
  s.predict.loss = choice<LossKernels>(cfg, "predict.loss");
  s.predict.logits = choice<LogitsLayout>(cfg, "predict.logits");
  s.predict.train_metrics = choice<TrainMetrics>(cfg, "predict.train_metrics");
  s.predict.memory = choice<MemoryModel>(cfg, "predict.memory");
  s.predict.grad_accumulate = choice<GradAccumulation>(cfg, "predict.grad_accumulate");
  s.predict.bucket_pass = choice<BucketPass>(cfg, "predict.bucket_pass");
  s.predict.embedding_grad = choice<EmbeddingGrad>(cfg, "predict.embedding_grad");
  s.predict.host = choice<HostCost>(cfg, "predict.host");
  s.predict.largest_micro_batch = flag(cfg, "predict.largest_micro_batch");
  s.predict.breakdown = flag(cfg, "predict.breakdown");
  s.deck = cfg.echo();
  return s;
}

RunSettings load_settings(const std::string& deck_path, const std::vector<std::string>& overrides, int world_size) {
  Config cfg;
  cfg.load_deck_file(deck_path);
  for (const auto& o : overrides) cfg.apply_override(o);
  resolve_and_validate(cfg, world_size);
  return read_settings(cfg);
}

}  // namespace kformer
