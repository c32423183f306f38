// Cross-key validation and derived keys (see validate.hpp).
#include "settings/validate.hpp"

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "comm/backend_choice.hpp"
#include "platform/errors.hpp"
#include "settings/systems.hpp"

namespace kformer {
namespace {

std::string s(std::int64_t v) { return std::to_string(v); }

void require(bool ok, const std::string& msg) {
  if (!ok) throw ConfigError(msg);
}

void validate_model(Config& cfg) {
  const auto d = cfg.i64("model.d_model"), h = cfg.i64("model.n_heads");
  if (cfg.i64("model.n_kv_heads") == 0) cfg.set_i64("model.n_kv_heads", h);
  const auto kv = cfg.i64("model.n_kv_heads");
  require(d % h == 0, "model.n_heads=" + s(h) + " does not divide model.d_model=" + s(d) +
                          ": choose n_heads so that d_model / n_heads is a whole head size");
  require(kv <= h && h % kv == 0, "model.n_kv_heads=" + s(kv) + " does not divide model.n_heads=" + s(h) +
                                      ": grouped-query attention shares each kv head among n_heads/n_kv_heads query heads");
  if (cfg.str("model.family") == "gpt")
    require(kv == h, "model.n_kv_heads=" + s(kv) + " but model.family=gpt uses full multi-head attention: "
                     "set model.n_kv_heads=" + s(h) + " (or 0), or model.family=llama for GQA");
  if (cfg.i64("model.ffn_dim") == 0) {
    const bool gpt = cfg.str("model.family") == "gpt";
    const std::int64_t ffn = gpt ? 4 * d : ((8 * d / 3 + 63) / 64) * 64;
    cfg.set_i64("model.ffn_dim", ffn);
  }
  require(cfg.i64("train.seq_len") <= cfg.i64("model.max_seq_len"),
          "train.seq_len=" + s(cfg.i64("train.seq_len")) + " exceeds model.max_seq_len=" +
              s(cfg.i64("model.max_seq_len")) + ": shorten the sequence or raise max_seq_len");
}

// cuDNN's flash attention takes bf16 (or fp16) tensors only: an fp32 run would need a conversion
// of q, k, v and out at every layer, which is not the kernel a user asked to measure.
void validate_kernels(const Config& cfg) {
  require(cfg.str("kernels.attention") != "vendor" || cfg.str("train.precision") == "bf16",
          "kernels.attention=vendor (cuDNN's flash attention) runs bf16 only, but train.precision=" +
              cfg.str("train.precision") + ": set train.precision=bf16, or kernels.attention=auto");
}

void validate_layout(Config& cfg, int world) {
  const auto tp = cfg.i64("parallel.tp"), pp = cfg.i64("parallel.pp");
  const auto h = cfg.i64("model.n_heads"), kv = cfg.i64("model.n_kv_heads");
  require(h % tp == 0, "parallel.tp=" + s(tp) + " does not divide model.n_heads=" + s(h) +
                           ": tensor parallelism splits whole heads; choose tp among the divisors of n_heads");
  require(kv % tp == 0, "parallel.tp=" + s(tp) + " does not divide model.n_kv_heads=" + s(kv) +
                            ": choose tp among the divisors of n_kv_heads");
  require(cfg.i64("model.ffn_dim") % tp == 0, "parallel.tp=" + s(tp) + " does not divide model.ffn_dim=" +
                                                  s(cfg.i64("model.ffn_dim")) + ": choose ffn_dim a multiple of tp");
  // parallel.stage_layers may leave the first and the last chunk without layers (the embedding
  // alone, the head alone): those may be chunks beyond the layers.
  const auto& given = cfg.ints("parallel.stage_layers");
  const std::int64_t bare_ends =
      given.size() > 1 ? std::int64_t(given.front() == 0) + std::int64_t(given.back() == 0) : 0;
  require(pp <= cfg.i64("model.n_layers") + bare_ends,
          "parallel.pp=" + s(pp) + " exceeds model.n_layers=" + s(cfg.i64("model.n_layers")) +
              ": every stage needs at least one layer (parallel.stage_layers may give the first and the last none)");
  require(world % (tp * pp) == 0, "parallel.tp*parallel.pp = " + s(tp * pp) + " does not divide the " + s(world) +
                                      " ranks of this job: launch a multiple of tp*pp ranks or change tp/pp");
  if (cfg.i64("parallel.dp") == 0) cfg.set_i64("parallel.dp", world / (tp * pp));
  const auto dp = cfg.i64("parallel.dp");
  require(dp * tp * pp == world, "parallel.dp*pp*tp = " + s(dp) + "*" + s(pp) + "*" + s(tp) + " = " + s(dp * pp * tp) +
                                     " but the job has " + s(world) + " ranks: launch " + s(dp * pp * tp) +
                                     " ranks, or omit parallel.dp to derive it");

  const auto gb = cfg.i64("train.global_batch"), mb = cfg.i64("train.micro_batch");
  require(gb % (mb * dp) == 0, "train.global_batch=" + s(gb) + " is not a multiple of train.micro_batch*dp = " +
                                   s(mb) + "*" + s(dp) + ": every data-parallel rank must see whole micro-batches");
  const auto m = gb / (mb * dp);
  if (cfg.i64("parallel.microbatches") == 0) cfg.set_i64("parallel.microbatches", m);
  require(cfg.i64("parallel.microbatches") == m,
          "parallel.microbatches=" + s(cfg.i64("parallel.microbatches")) + " but global_batch/(micro_batch*dp) = " +
              s(m) + ": set parallel.microbatches=" + s(m) + " or omit it");
  if (pp > 1)
    require(m >= pp, "parallel.microbatches=" + s(m) + " is fewer than parallel.pp=" + s(pp) +
                         ": raise train.global_batch or lower train.micro_batch so that every stage has work");

  const auto& stages = cfg.ints("parallel.stage_layers");
  if (!stages.empty()) {
    std::int64_t sum = 0;
    for (auto n : stages) sum += n;
    require(static_cast<std::int64_t>(stages.size()) == pp * cfg.i64("parallel.virtual_stages") &&
                sum == cfg.i64("model.n_layers"),
            "parallel.stage_layers has " + s(static_cast<std::int64_t>(stages.size())) + " entries summing to " +
                s(sum) + ": give pp*virtual_stages entries that sum to model.n_layers=" + s(cfg.i64("model.n_layers")));
    // A chunk of no layers holds the embedding (the first) or the final norm and head (the last);
    // one in between would hold nothing.
    for (std::size_t i = 1; i + 1 < stages.size(); ++i)
      require(stages[i] > 0, "parallel.stage_layers entry " + s(static_cast<std::int64_t>(i)) +
                                 " is 0: only the first chunk (the embedding alone) or the last (the final norm "
                                 "and head alone) may hold no layers; give it one or more");
  }
  const auto v = cfg.i64("parallel.virtual_stages");
  if (cfg.str("parallel.schedule") == "interleaved") {
    require(v >= 2 && pp > 1, "parallel.schedule=interleaved needs parallel.pp > 1 and parallel.virtual_stages >= 2");
    require(m % pp == 0, "parallel.schedule=interleaved needs parallel.microbatches (" + s(m) +
                             ") to be a multiple of parallel.pp=" + s(pp) + ": change train.global_batch or train.micro_batch");
  } else {
    require(v == 1, "parallel.virtual_stages=" + s(v) + " needs parallel.schedule=interleaved");
  }
  if (cfg.str("parallel.sequence_parallel") == "true") {
    const auto tokens = cfg.i64("train.micro_batch") * cfg.i64("train.seq_len"), tp = cfg.i64("parallel.tp");
    require(tp > 1, "parallel.sequence_parallel=true needs parallel.tp > 1: it splits what tensor parallelism replicates");
    require(tokens % tp == 0, "parallel.sequence_parallel=true needs train.micro_batch*train.seq_len (" + s(tokens) +
                                  ") to be a multiple of parallel.tp=" + s(tp) + ": each TP rank holds an equal share");
  }
  require(cfg.i64("train.recompute_layers") == 0 || cfg.str("train.recompute") == "full",
          "train.recompute_layers=" + s(cfg.i64("train.recompute_layers")) + " chooses the blocks train.recompute=full "
          "re-runs, but train.recompute=" + cfg.str("train.recompute") + ": set train.recompute=full or drop "
          "train.recompute_layers");
  if (cfg.str("train.recompute") == "op") {
    require(cfg.str("model.family") == "llama",
            "train.recompute=op is torchtitan's policy for Llama blocks (it re-runs the K and up projections): set "
            "model.family=llama, or train.recompute=selective or full for gpt");
    require(cfg.str("parallel.sequence_parallel") != "true" || cfg.i64("parallel.tp") == 1,
            "train.recompute=op with parallel.sequence_parallel=true is not built: use train.recompute=full, or "
            "parallel.sequence_parallel=false");
    require(cfg.str("parallel.schedule") != "zb-h1",
            "train.recompute=op with parallel.schedule=zb-h1 is not built (the deferred weight gradients read what op "
            "re-runs): use train.recompute=selective or parallel.schedule=1f1b");
  }
  require(!(cfg.str("train.recompute") == "full" && cfg.str("parallel.schedule") == "zb-h1"),
          "train.recompute=full with parallel.schedule=zb-h1: the deferred weight gradients need the activations "
          "full recomputation drops; use train.recompute=selective or parallel.schedule=1f1b");
  const std::string sched = cfg.str("parallel.schedule");
  const std::string preset = set_by_software_system(cfg, "predict.pipeline_calls");
  require(cfg.str("predict.pipeline_calls") != "one_by_one" || pp == 1 || sched == "1f1b",
          "predict.pipeline_calls=one_by_one" + (preset.empty() ? std::string() : " (set by " + preset + ")") +
              " orders the blocking sends and receives as DeepSpeed's one schedule, 1F1B, does, not "
              "parallel.schedule=" + sched + ": use parallel.schedule=1f1b or predict.pipeline_calls=grouped");
  require(cfg.str("predict.pipeline_calls") != "one_by_one" || cfg.str("predict.pipeline_p2p") != "prefetched",
          "predict.pipeline_calls=one_by_one (DeepSpeed's blocking calls) and predict.pipeline_p2p=prefetched "
          "(Megatron-Core's non-blocking ones) describe two different pipelines: set one of them back "
          "(predict.pipeline_calls=grouped or predict.pipeline_p2p=serialized)");
  require(pp * v <= cfg.i64("model.n_layers") + bare_ends,
          "parallel.pp*parallel.virtual_stages = " + s(pp * v) + " model chunks exceed model.n_layers=" +
              s(cfg.i64("model.n_layers")) + ": every chunk needs at least one layer");

  require(cfg.str("output.export").empty() || world == 1,
          "output.export needs a one-rank run (the export holds whole tensors): run it without mpirun -n " + s(world));
  const auto sr = cfg.i64("straggler.rank");
  require(sr < world, "straggler.rank=" + s(sr) + " is not a rank of this " + s(world) + "-rank job: use -1..." +
                          s(world - 1));
}

// Products of sizes that the code keeps in 32-bit or 64-bit integers, and the length of the
// schedule it builds: each key is range-checked alone (schema.cpp), these are checked together.
void validate_products(const Config& cfg) {
  constexpr std::int64_t kInt32 = std::numeric_limits<std::int32_t>::max();
  const auto b = cfg.i64("train.micro_batch"), t = cfg.i64("train.seq_len");
  const auto heads = cfg.i64("model.n_heads") / cfg.i64("parallel.tp");
  // All three are at most 2^24 (schema), so the product fits an int64.
  require(b * t * heads <= kInt32,
          "train.micro_batch*train.seq_len*(model.n_heads/parallel.tp) = " + s(b) + "*" + s(t) + "*" + s(heads) +
              " = " + s(b * t * heads) + " attention rows per micro-batch exceed " + s(kInt32) +
              ", the most the kernels index with 32-bit integers: lower train.micro_batch or train.seq_len");

  const auto m = cfg.i64("parallel.microbatches"), pp = cfg.i64("parallel.pp");
  const auto v = cfg.i64("parallel.virtual_stages");
  constexpr std::int64_t kMaxSteps = 1 << 20;
  require(m * pp * v <= kMaxSteps,
          "parallel.microbatches*parallel.pp*parallel.virtual_stages = " + s(m) + "*" + s(pp) + "*" + s(v) + " = " +
              s(m * pp * v) + " pipeline steps per iteration exceed " + s(kMaxSteps) +
              ": raise train.micro_batch or lower train.global_batch");

  // Tokens consumed by the end of the run, counted in an int64.
  const auto steps = cfg.i64("train.steps"), gb = cfg.i64("train.global_batch");
  std::int64_t tokens = 0;
  require(!__builtin_mul_overflow(steps, gb, &tokens) && !__builtin_mul_overflow(tokens, t, &tokens),
          "train.steps*train.global_batch*train.seq_len overflows the 64-bit count of consumed tokens: "
          "lower train.steps");

  const double bw = cfg.f64("comm.emulate.bandwidth_gbps");
  require(bw == 0 || bw >= 1e-3, "comm.emulate.bandwidth_gbps=" + format_value(bw) +
                                     " is below 0.001 Gbit/s (1 Mbit/s), where a message of a few MB takes hours: "
                                     "give at least 0.001, or 0 for no limit");
}

// predict.memory=composer_mpt and megatron_lm count what Composer's FSDP holds for MPT's blocks and
// what Megatron-LM holds for its GPT layers (predict/software_memory.hpp): layouts outside the runs
// each describes get one line and a fix.
void validate_predict_memory(const Config& cfg) {
  const std::string memory = cfg.str("predict.memory");
  if (memory == "kformer") return;
  const std::string by = set_by_software_system(cfg, "predict.memory");
  const std::string what = "predict.memory=" + memory + (by.empty() ? std::string() : " (from " + by + ")");
  const std::string fix = ", or set predict.memory=kformer for kformer's own step's memory";
  const std::string counts = memory == "megatron_lm" ? "Megatron-LM's GPT layers (Korthikanti et al.)"
                                                     : "MPT's blocks (LayerNorm, one QKV projection, GELU)";
  require(cfg.str("model.family") == "gpt", what + " counts " + counts + ", not model.family=" +
                                                cfg.str("model.family") + "'s: use a gpt deck" + fix);
  if (memory == "megatron_lm") {
    const std::string sched = cfg.str("parallel.schedule");
    require(sched == "1f1b" || sched == "interleaved", what + " counts Megatron-LM's 1F1B and interleaved schedules, "
                                                             "not parallel.schedule=" + sched + fix);
    require(cfg.i64("parallel.zero") <= 2 || cfg.i64("parallel.dp") == 1,
            what + " counts Megatron-LM's distributed optimizer (parallel.zero=1 or 2), which shards the optimizer's "
                   "states, not parallel.zero=3's parameters: set parallel.zero=1" + fix);
    require(cfg.i64("train.recompute_layers") == 0, what + " counts train.recompute=full on every layer, not on "
                                                           "train.recompute_layers=" + s(cfg.i64("train.recompute_layers")) +
                                                           ": drop train.recompute_layers" + fix);
    return;
  }
  require(cfg.i64("parallel.tp") == 1 && cfg.i64("parallel.pp") == 1,
          what + " counts Composer's FSDP, which has neither tensor nor pipeline parallelism: set parallel.tp=1 "
                 "parallel.pp=1" + fix);
  const auto zero = cfg.i64("parallel.zero"), dp = cfg.i64("parallel.dp");
  require(zero >= 2 || dp == 1, what + " counts FSDP's FULL_SHARD (parallel.zero=3) or SHARD_GRAD_OP (parallel.zero=2), "
                                       "not parallel.zero=" + s(zero) + " over parallel.dp=" + s(dp) + fix);
  const std::string rc = cfg.str("train.recompute");
  require((rc == "none" || rc == "full") && cfg.i64("train.recompute_layers") == 0,
          what + " counts Composer's activation checkpointing, which re-runs whole blocks or none, not "
                 "train.recompute=" + rc + (cfg.i64("train.recompute_layers") ? " on some layers" : "") +
                 ": set train.recompute=full or none without train.recompute_layers" + fix);
}

}  // namespace

void resolve_and_validate(Config& cfg, int world_size) {
  if (world_size < 1) throw std::logic_error("resolve_and_validate: a job has at least one rank");
  apply_software_system(cfg);  // predict.system's keys, where neither the deck nor the command line gave them
  validate_model(cfg);
  validate_kernels(cfg);
  validate_layout(cfg, world_size);
  validate_products(cfg);
  validate_predict_memory(cfg);
  if (cfg.str("comm.backend") == "auto") {  // backend_choice.hpp; printed as "auto -> mpi (why)"
    const comm::BackendChoice b = comm::resolve_backend("auto", world_size);
    cfg.resolve_auto("comm.backend", b.backend, b.reason);
  }
}

}  // namespace kformer
