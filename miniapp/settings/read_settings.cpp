// Config -> RunSettings (see read_settings.hpp).
#include "settings/read_settings.hpp"

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
  m.family = choice<Family>(cfg, "model.family");
  m.n_layers = cfg.i32("model.n_layers");
  m.d_model = cfg.i32("model.d_model");
  m.n_heads = cfg.i32("model.n_heads");
  m.n_kv_heads = cfg.i32("model.n_kv_heads");
  m.ffn_dim = cfg.i32("model.ffn_dim");
  m.vocab_size = cfg.i32("model.vocab_size");
  m.max_seq_len = cfg.i32("model.max_seq_len");

  TrainSettings& t = s.train;
  t.steps = cfg.i32("train.steps");
  t.global_batch = cfg.i32("train.global_batch");
  t.micro_batch = cfg.i32("train.micro_batch");
  t.seq_len = cfg.i32("train.seq_len");
  t.lr = cfg.f64("train.lr");
  t.warmup = cfg.i32("train.warmup");
  t.weight_decay = cfg.f64("train.weight_decay");
  t.grad_clip = cfg.f64("train.grad_clip");
  t.seed = static_cast<std::uint64_t>(cfg.i64("train.seed"));
  t.precision = choice<Precision>(cfg, "train.precision");
  t.recompute = choice<Recompute>(cfg, "train.recompute");
  t.max_nan = cfg.i32("train.max_nan");
  t.stop_at = cfg.i32("train.stop_at");

  ParallelSettings& p = s.parallel;
  p.tp = cfg.i32("parallel.tp");
  p.pp = cfg.i32("parallel.pp");
  p.dp = cfg.i32("parallel.dp");
  p.zero = cfg.i32("parallel.zero");
  p.grad_reduce_dtype = choice<Precision>(cfg, "parallel.grad_reduce_dtype");
  p.schedule = choice<ScheduleKind>(cfg, "parallel.schedule");
  p.sequence_parallel = flag(cfg, "parallel.sequence_parallel");
  p.microbatches = cfg.i32("parallel.microbatches");
  p.virtual_stages = cfg.i32("parallel.virtual_stages");
  for (std::int64_t n : cfg.ints("parallel.stage_layers")) p.stage_layers.push_back(static_cast<int>(n));

  CommSettings& c = s.comm;
  c.backend = cfg.str("comm.backend");
  c.auto_reason = cfg.auto_reason("comm.backend");
  c.latency_us = cfg.f64("comm.emulate.latency_us");
  c.bandwidth_gbps = cfg.f64("comm.emulate.bandwidth_gbps");
  c.timeout_s = cfg.f64("comm.timeout_s");
  c.strict = flag(cfg, "comm.strict");

  s.kernels.gemm = choice<GemmSetting>(cfg, "kernels.gemm");
  s.kernels.attention = choice<AttentionKind>(cfg, "kernels.attention");

  s.checkpoint.save = cfg.str("checkpoint.save");
  s.checkpoint.load = cfg.str("checkpoint.load");
  s.checkpoint.every = cfg.i32("checkpoint.every");

  OutputSettings& o = s.output;
  o.json = cfg.str("output.json");
  o.trace = cfg.str("output.trace");
  o.export_dir = cfg.str("output.export");
  o.log_every = cfg.i32("output.log_every");
  o.phase_timing = flag(cfg, "output.phase_timing");
  o.peak_tflops = cfg.f64("output.peak_tflops");

  s.straggler.rank = cfg.i32("straggler.rank");
  s.straggler.slowdown = cfg.f64("straggler.slowdown");
  s.predict.machine = cfg.str("predict.machine");
  s.predict.world = cfg.i64("predict.world");
  s.data_source = cfg.str("data.source");
  s.memory_limit_gb = cfg.f64("memory.limit_gb");
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
