// The deck schema (see schema.hpp) and the parsing of one value against it.
#include "schema.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "errors.hpp"
#include "kformer_config.hpp"

namespace kformer {
namespace {

constexpr double kNoMax = std::numeric_limits<double>::infinity();

KeySpec integer(std::string n, std::int64_t d, double lo, double hi, std::string help) {
  return {std::move(n), KeyType::integer, d, {}, lo, hi, std::move(help)};
}
KeySpec real(std::string n, double d, double lo, double hi, std::string help) {
  return {std::move(n), KeyType::real, d, {}, lo, hi, std::move(help)};
}
KeySpec text(std::string n, std::string d, std::string help) {
  return {std::move(n), KeyType::text, std::move(d), {}, 0, 0, std::move(help)};
}
KeySpec choice(std::string n, std::vector<std::string> c, std::string help) {
  std::string d = c.front();
  return {std::move(n), KeyType::choice, d, std::move(c), 0, 0, std::move(help)};
}

std::vector<KeySpec> make_schema() {
  const std::string default_backend = KFORMER_ENABLE_MPI ? "mpi" : "self";
  std::vector<std::string> backends = {default_backend};
  for (const char* b : {"self", "mpi", "nccl"})
    if (b != default_backend) backends.push_back(b);
  return {
      choice("model.family", {"gpt", "llama"},
             "gpt: LayerNorm, learned positions, GELU, tied head; llama: RMSNorm, RoPE, SwiGLU, GQA, untied head"),
      integer("model.n_layers", 2, 1, 100000, "transformer blocks"),
      integer("model.d_model", 64, 1, 1 << 20, "hidden size C"),
      integer("model.n_heads", 4, 1, 1 << 16, "attention (query) heads; must divide d_model"),
      integer("model.n_kv_heads", 0, 0, 1 << 16, "key/value heads (GQA); 0 = n_heads; must divide n_heads"),
      integer("model.ffn_dim", 0, 0, 1 << 22, "MLP hidden size; 0 = 4*d_model (gpt) or 8/3*d_model rounded to 64 (llama)"),
      integer("model.vocab_size", 256, 2, 1 << 24, "vocabulary size (padded to a multiple of 64*tp internally)"),
      integer("model.max_seq_len", 64, 1, 1 << 22, "longest sequence the position table or RoPE covers"),
      integer("train.steps", 10, 0, kNoMax, "last iteration (counted from the start of the run, also after a resume)"),
      integer("train.global_batch", 8, 1, kNoMax, "sequences per iteration, over all data-parallel ranks"),
      integer("train.micro_batch", 2, 1, kNoMax, "sequences per forward/backward pass on one rank"),
      integer("train.seq_len", 32, 1, 1 << 22, "tokens per sequence T (<= model.max_seq_len)"),
      real("train.lr", 3e-4, 0, kNoMax, "peak learning rate (AdamW)"),
      integer("train.warmup", 0, 0, kNoMax, "iterations of linear warm-up, then cosine decay to lr/10"),
      real("train.weight_decay", 0.1, 0, kNoMax, "decoupled weight decay (AdamW)"),
      real("train.grad_clip", 1.0, 0, kNoMax, "global gradient-norm clip; 0 = off"),
      integer("train.seed", 1234, 0, kNoMax, "seed of parameter initialisation and random data"),
      integer("train.max_nan", 5, 1, kNoMax, "stop after this many non-finite iterations in a row"),
      integer("train.stop_at", 0, 0, kNoMax,
              "stop after this iteration, as a walltime would (checkpoint saved); 0 = run to train.steps"),
      real("memory.limit_gb", 0, 0, kNoMax, "refuse a layout whose per-rank estimate exceeds it; 0 = no limit"),
      text("data.source", "random", "'random' (tokens from the global sample index) or a uint16 token file (llm.c header)"),
      integer("parallel.tp", 1, 1, 4096, "tensor-parallel ranks (must divide n_heads and n_kv_heads)"),
      integer("parallel.pp", 1, 1, 4096, "pipeline stages"),
      integer("parallel.dp", 0, 0, kNoMax, "data-parallel ranks; 0 = world / (tp*pp)"),
      integer("parallel.zero", 0, 0, 3, "0 none, 1 optimizer state sharded, 2 + gradients, 3 + parameters (FSDP)"),
      choice("parallel.schedule", {"1f1b", "gpipe", "interleaved"}, "pipeline schedule"),
      integer("parallel.microbatches", 0, 0, kNoMax, "micro-batches per iteration per pipeline; 0 = global_batch / (micro_batch*dp)"),
      integer("parallel.virtual_stages", 1, 1, 1024, "model chunks per rank for the interleaved schedule"),
      KeySpec{"parallel.stage_layers", KeyType::int_list, std::vector<std::int64_t>{}, {}, 1, kNoMax,
              "layers per pipeline stage, e.g. 3,3,3,3; empty = as even as possible"},
      choice("comm.backend", backends, "communicator backend"),
      real("comm.emulate.latency_us", 0, 0, kNoMax, "emulated network latency added per message (alpha)"),
      real("comm.emulate.bandwidth_gbps", 0, 0, kNoMax, "emulated network bandwidth (beta), Gbit/s; 0 = no limit"),
      real("comm.timeout_s", 600, 0, kNoMax, "abort a collective that has not completed after this long"),
      integer("straggler.rank", -1, -1, kNoMax, "world rank whose compute is stretched; -1 = none"),
      real("straggler.slowdown", 1.0, 1.0, kNoMax, "factor by which the straggler's compute is stretched"),
      choice("kernels.gemm", {"native", "vendor"}, "GEMM: portable Kokkos or the vendor library (BLAS, cuBLAS)"),
      choice("kernels.attention", {"naive", "fused"}, "attention: materialised scores or tiled online softmax"),
      text("checkpoint.save", "", "directory to save universal checkpoints into; empty = none"),
      text("checkpoint.load", "", "checkpoint directory to resume from; empty = start fresh"),
      integer("checkpoint.every", 0, 0, kNoMax, "save every N iterations (and at the end); 0 = only at the end"),
      text("output.json", "", "path of the JSON report written by rank 0; empty = none"),
      text("output.trace", "", "directory for Chrome trace-event timelines; empty = none"),
      integer("output.log_every", 1, 1, kNoMax, "print a log line every N iterations"),
      real("output.peak_tflops", 0, 0, kNoMax, "datasheet peak TFLOP/s per rank for a second MFU figure; 0 = none"),
      text("output.export", "", "one-rank runs: write parameters, gradients and tokens of iteration 1 as safetensors (reference checks)"),
  };
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: a swap of two neighbours counts as one edit ("laeyrs").
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

[[noreturn]] void bad(const KeySpec& spec, const std::string& text) {
  throw ConfigError(spec.name + "='" + text + "' is not valid: expected " + describe_valid(spec));
}

std::int64_t parse_int(const KeySpec& spec, const std::string& text) {
  const std::string t = trim(text);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || *end != '\0' || errno == ERANGE) bad(spec, text);
  return v;
}

void check_range(const KeySpec& spec, double v, const std::string& text) {
  if (v < spec.min || v > spec.max) bad(spec, text);
}

}  // namespace

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> s = make_schema();
  return s;
}

const KeySpec* find_key(const std::string& name) {
  for (const auto& k : schema())
    if (k.name == name) return &k;
  return nullptr;
}

std::string suggest_key(const std::string& name) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& k : schema()) {
    const std::size_t d = edit_distance(name, k.name);
    if (d < best_d) best_d = d, best = k.name;
  }
  // Also match on the last component alone ("n_layers" -> "model.n_layers").
  for (const auto& k : schema()) {
    const std::string leaf = k.name.substr(k.name.rfind('.') + 1);
    if (leaf == name) return k.name;
  }
  return best_d <= std::max<std::size_t>(2, name.size() / 4) ? best : "";
}

Value parse_value(const KeySpec& spec, const std::string& text) {
  switch (spec.type) {
    case KeyType::integer: {
      const std::int64_t v = parse_int(spec, text);
      check_range(spec, static_cast<double>(v), text);
      return v;
    }
    case KeyType::real: {
      const std::string t = trim(text);
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(t.c_str(), &end);
      if (t.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) bad(spec, text);
      check_range(spec, v, text);
      return v;
    }
    case KeyType::text: return trim(text);
    case KeyType::choice: {
      const std::string t = trim(text);
      if (std::find(spec.choices.begin(), spec.choices.end(), t) == spec.choices.end()) bad(spec, text);
      return t;
    }
    case KeyType::int_list: {
      std::string t = trim(text);
      if (!t.empty() && t.front() == '[' && t.back() == ']') t = t.substr(1, t.size() - 2);
      std::vector<std::int64_t> out;
      if (trim(t).empty()) return out;
      std::stringstream ss(t);
      std::string item;
      while (std::getline(ss, item, ',')) {
        const std::int64_t v = parse_int(spec, item);
        check_range(spec, static_cast<double>(v), text);
        out.push_back(v);
      }
      return out;
    }
  }
  bad(spec, text);
}

std::string format_value(const Value& v) {
  std::ostringstream os;
  if (auto* i = std::get_if<std::int64_t>(&v)) os << *i;
  else if (auto* d = std::get_if<double>(&v)) os << *d;
  else if (auto* s = std::get_if<std::string>(&v)) os << *s;
  else {
    const auto& l = std::get<std::vector<std::int64_t>>(v);
    os << '[';
    for (std::size_t i = 0; i < l.size(); ++i) os << (i ? "," : "") << l[i];
    os << ']';
  }
  return os.str();
}

std::string describe_valid(const KeySpec& spec) {
  std::ostringstream os;
  auto range = [&](const char* what) {
    os << what;
    if (std::isfinite(spec.max)) os << " in [" << spec.min << ", " << spec.max << "]";
    else os << " >= " << spec.min;
  };
  switch (spec.type) {
    case KeyType::integer: range("an integer"); break;
    case KeyType::real: range("a number"); break;
    case KeyType::text: os << "a string"; break;
    case KeyType::choice:
      os << "one of ";
      for (std::size_t i = 0; i < spec.choices.size(); ++i) os << (i ? ", " : "") << spec.choices[i];
      break;
    case KeyType::int_list: range("a comma-separated list of integers, each"); break;
  }
  return os.str();
}

}  // namespace kformer
