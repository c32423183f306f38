// The predict command (see predict_command.hpp).
#include "predict/predict_command.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "settings/cli.hpp"
#include "settings/prediction_deck.hpp"
#include "platform/errors.hpp"
#include "io/json_file.hpp"
#include "plan/memory.hpp"
#include "plan/run_plan.hpp"
#include "train/make_plan.hpp"
#include "predict/kernel_costs.hpp"
#include "predict/key_costs.hpp"
#include "predict/largest_fit.hpp"
#include "predict/predict_report.hpp"
#include "settings/schema.hpp"
#include "predict/step_sim.hpp"

namespace kformer::predict {
namespace {

// The first line's word on predict.host: what the host adds, or that the profile cannot say.
std::string host_text(HostCost host, const MachineProfile& profile) {
  if (host == HostCost::kformer) return "";
  const bool blocking = host == HostCost::blocking;
  if (!profile.eager_host.costs(host))
    return std::string(", host ") + name_of(host) + " not costed (the profile has no eager_host" +
           (blocking ? " blocking" : "") + " figures: bench/eager_op_cost.py measures them)";
  return blocking ? ", each kernel waited for by the host (CUDA_LAUNCH_BLOCKING=1)"
                  : ", eager PyTorch's host time as each layer's floor";
}

// A line on how the published runs on this profile came out, where it says (published_accuracy).
std::string published_text(const MachineProfile& profile) {
  const PublishedAccuracy& a = profile.published;
  if (!a.given()) return "";
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << "\npublished runs on this profile: " << a.rows << " (median error "
    << a.median_abs_pct << "%, mean " << std::showpos << a.mean_signed_pct << std::noshowpos << "%"
    << (a.mean_signed_pct < -5  ? "; steps predicted here come out shorter than measured"
        : a.mean_signed_pct > 5 ? "; steps predicted here come out longer than measured"
                                : "")
    << (a.note.empty() ? "" : ": " + a.note) << "; docs/predict-published.md)";
  return o.str();
}

// How the profile rates cuDNN's fused kernels at T (Transformer Engine's, and kformer's vendor kind).
std::string cudnn_rate_text(const ComputeRates& r, int t) {
  if (!r.cudnn_forward_tflops.given() && !r.cudnn_backward_tflops.given())
    return "on the GEMM curve (the profile has no cudnn_*_tflops)";
  return "at most the profile's " + format_value(r.cudnn_forward_tflops.at(t)) + " TFLOP/s forward and " +
         format_value(r.cudnn_backward_tflops.at(t)) + " backward at T " + std::to_string(t) + " (cudnn_*_tflops)";
}

// Where the run's attention calls do less work than the flash charts' calls (one micro-batch of the
// heads a TP rank holds), the share of the charted rates they are costed at (half_rate_share).
std::string size_text(const RunSettings& cfg, const ComputeRates& r) {
  const ModelShape s = model_shape(cfg);
  const int heads = s.n_heads / std::max(1, cfg.parallel.tp);
  const double f = attention_size_factor(r, cfg.train.micro_batch, heads, cfg.train.seq_len, s.head_dim);
  if (f >= 1) return "";
  char times[16];
  std::snprintf(times, sizeof(times), "%.2f", f);
  return std::string(", times ") + times + " for its calls of " + std::to_string(cfg.train.micro_batch) + " x " +
         std::to_string(heads) + " heads, less work than the charts' (half_rate_share)";
}

// How the profile rates batched-GEMM attention (Megatron-LM's, and kformer's batched_gemm kind).
std::string batched_rate_text(const RunSettings& cfg, const ComputeRates& r) {
  const int t = cfg.train.seq_len, hd = model_shape(cfg).head_dim;
  const double rate = batched_gemm_rate(r, t, hd);
  if (rate <= 0)
    return std::string("as modelled (the profile gives no batched_gemm_tflops in ") + (cfg.bf16() ? "bf16" : "fp32") + ")";
  return "no faster than the profile's " + std::to_string(std::lround(rate)) + " TFLOP/s at T " + std::to_string(t) +
         ", heads of " + std::to_string(hd) + " (batched_gemm_tflops)";
}

// The first line's word on the attention: the system's kernel and the rate it is costed at, or
// kformer's own (with what kernels.attention=auto chose, and how a kind the profile rates only by
// another system's figures is costed).
std::string attention_text(const RunSettings& cfg, AttentionKind own, const MachineProfile& profile) {
  const int t = cfg.train.seq_len, hd = model_shape(cfg).head_dim;
  const ComputeRates& r = profile.rates(cfg.bf16());
  const double flash2 = r.flash2_tflops.at(hd, t);
  const std::string at_shape = " TFLOP/s at T " + std::to_string(t) + ", heads of " + std::to_string(hd);
  switch (cfg.predict.attention) {
    case AttentionModel::kformer: {
      const std::string text = std::string(", attention ") +
                               (cfg.kernels.attention == AttentionSetting::automatic ? "auto -> " : "") + name_of(own);
      if (r.attention_tflops.count(name_of(own))) return text;
      if (own == AttentionKind::vendor) return text + ", cuDNN's fused kernels " + cudnn_rate_text(r, t) + size_text(cfg, r);
      if (own == AttentionKind::batched_gemm) return text + ", batched GEMMs around a softmax " + batched_rate_text(cfg, r);
      return text;
    }
    case AttentionModel::flash:
      return flash2 > 0 ? ", attention costed as FlashAttention-2's, at most the profile's " + format_value(flash2) +
                              at_shape + " (flash2_tflops)" + size_text(cfg, r)
                        : std::string(", attention costed as FlashAttention-2's on the GEMM curve (the profile has no "
                                      "flash2_tflops)");
    case AttentionModel::cudnn:
      return ", attention costed as cuDNN's fused kernels, " + cudnn_rate_text(r, t) + size_text(cfg, r);
    case AttentionModel::triton:  // predict refuses a profile without the rate
      return ", attention costed as FlashAttention's Triton kernel's, at most the profile's " +
             format_value(r.triton_tflops.at(hd, t)) + at_shape + " (triton_tflops)" + size_text(cfg, r);
    case AttentionModel::batched_gemm:
      return ", attention costed as batched_gemm's kernels (Megatron-LM's), " + batched_rate_text(cfg, r);
    default: return std::string(", attention costed as ") + name_of(cfg.predict.attention) + "'s kernels";
  }
}

// The first line's word on the build whose kernels kformer's own run is described with, on a GPU's
// profile (own_build.hpp).
std::string build_text(const RunPlan& plan) {
  if (plan.code_path != kernels::CodePath::cuda) return "";
  const bool auto_gemm = plan.settings.kernels.gemm == GemmSetting::automatic;
  return std::string(", kformer's CUDA build with GEMMs ") + (auto_gemm ? "auto -> " : "") + to_string(plan.gemm) +
         (plan.gemm == kernels::GemmImpl::vendor && plan.settings.bf16()
              ? " (cuBLAS, bf16 outputs and GELU in cuBLASLt's epilogues)"
              : "");
}

// The first line's word on the SMs a collective holds beside compute (NetworkCost::compute_share_lost).
std::string sms_text(const MachineProfile& p) {
  if (!p.holds_collective_sms()) return "";
  return ", collectives beside compute holding " + std::to_string(p.collective_sms_intra) + " (in a node) and " +
         std::to_string(p.collective_sms_inter) + " (across nodes) of its " + std::to_string(p.sms) + " SMs";
}

}  // namespace

int run_predict(const std::vector<std::string>& args) {
  const auto t0 = std::chrono::steady_clock::now();
  PredictionDeck deck = read_prediction_deck("predict", args, false);
  const CliArgs& cli = deck.cli;
  if (cli.exit_now) return cli.exit_code;
  if (cli.version || cli.keys) {
    std::cout << (cli.version ? version_text() : keys_text());
    return 0;
  }
  const RunSettings& given = deck.settings;
  const int world = deck.world;

  const std::string path = given.predict.machine.empty() ? default_profile_path() : given.predict.machine;
  struct stat st {};
  if (given.predict.machine.empty() && ::stat(path.c_str(), &st) != 0)
    throw ConfigError("no machine profile at " + path + ": run kformer calibrate DECK on this machine first, or give "
                      "predict.machine=FILE (e.g. input/machines/perlmutter-a100-40gb.yaml)");
  const MachineProfile profile = load_profile(path);
  if (given.predict.attention == AttentionModel::triton && !profile.rates(given.bf16()).triton_tflops.given()) {
    if (!given.bf16())
      throw ConfigError("predict.attention=triton: FlashAttention's Triton kernel runs in 16-bit types only; give "
                        "train.precision=bf16");
    throw ConfigError("predict.attention=triton: the machine profile " + path +
                      " gives no bf16 attention.triton_tflops (FlashAttention's Triton kernel's published rate on that "
                      "GPU); add it there, or choose another predict.attention");
  }
  // kernels.attention=auto costs what start-up would choose there (the profile's fastest); the
  // memory estimate (a described step) is made once, with that kernel.
  const RunPlan plan = with_memory(costed_layout(given, profile));
  const RunSettings& cfg = plan.settings;
  const StepPrediction p = predict_step(plan, profile, !cfg.output.trace.empty());
  nlohmann::json report = predict_report(plan, profile, p);
  const std::string breakdown = cfg.predict.breakdown ? add_key_costs(report, cfg, profile, p.step_ms) : "";
  std::string largest;
  if (cfg.predict.largest_micro_batch) {
    const LargestFit fit = largest_fitting_micro_batch(args, cfg, profile);
    report["summary"]["memory"]["largest_micro_batch"] = fit.to_json();
    largest = fit.text();
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::cout << "kformer predict: deck " << cli.deck << " on " << world << " rank(s) (dp=" << cfg.parallel.dp
            << " pp=" << cfg.parallel.pp << " tp=" << cfg.parallel.tp << "), machine " << profile.name
            << " (" << path << ")"
            << ", system " << cfg.predict.system
            << build_text(plan) << attention_text(cfg, plan.attention, profile)
            << (cfg.comm.latency_us > 0 || cfg.comm.bandwidth_gbps > 0
                    ? ", emulated network " + format_value(cfg.comm.latency_us) + " us, " +
                          format_value(cfg.comm.bandwidth_gbps) + " Gbit/s"
                    : std::string())
            << (cfg.predict.pipeline_p2p == PipelineP2p::serialized ? ", pipeline sends serialized with compute"
                : cfg.predict.pipeline_p2p == PipelineP2p::prefetched && cfg.parallel.pp > 1
                    ? ", pipeline sends and receives non-blocking, each input received during the action before"
                    : "")
            << (cfg.predict.pipeline_calls == PipelineCalls::one_by_one && cfg.parallel.pp > 1
                    ? ", each pipeline send and receive a blocking call of its own"
                    : "")
            << (cfg.predict.grad_reduce == GradReduce::serialized ? ", gradient reduction after the backward"
                : cfg.predict.grad_reduce == GradReduce::delayed && cfg.parallel.pp > 1
                    ? (cfg.parallel.schedule == ScheduleKind::interleaved
                           ? ", each chunk's gradient reduction launched pipeline-rank backward steps after its last backward"
                           : ", gradient reduction delayed past the last backward on all but the first stage")
                    : "")
            << (cfg.predict.tp_comm == Overlap::overlapped ? ", TP collectives overlapped with their GEMMs" : "")
            << (cfg.predict.tp_input_grad == Overlap::overlapped && cfg.predict.tp_comm != Overlap::overlapped
                    ? ", input-gradient TP collectives beside the weight-gradient GEMMs"
                    : "")
            << (cfg.predict.tp_precision == TpPrecision::activations && cfg.bf16()
                    ? ", TP collectives of activations in bf16"
                    : "")
            << (cfg.predict.attention_dropout > 0 && cfg.predict.attention == AttentionModel::batched_gemm
                    ? ", attention dropout " + format_value(cfg.predict.attention_dropout)
                    : std::string())
            << (cfg.predict.param_gather == Overlap::overlapped ? ", parameter gather beside the next forward" : "")
            << (cfg.predict.gather_copy == GatherCopy::copy_out && plan.numerics.shards_values
                    ? ", each ZeRO-3 gather copied out into the parameters"
                    : "")
            << (cfg.predict.scatter_copy == ScatterCopy::copy_in && plan.numerics.shards_grads
                    ? ", each unit's gradients copied into its reduce-scatter's input"
                    : "")
            << (cfg.predict.zero3_gather == Overlap::overlapped && plan.numerics.shards_values
                    ? ", each ZeRO-3 gather beside the previous unit's compute"
                    : "")
            << (cfg.predict.pipeline_messages != PipelineMessages::split && cfg.parallel.pp > 1 && plan.dims.splits_messages()
                    ? cfg.predict.pipeline_messages == PipelineMessages::partitioned
                          ? ", each stage's output gathered back over TP before its backward"
                          : ", each stage's output gathered back over TP before its backward and the gradients sent whole"
                    : "")
            << (cfg.predict.residual != ResidualStream::fp32 && cfg.bf16()
                    ? cfg.predict.residual == ResidualStream::activations ? ", the residual stream in bf16"
                                                                          : ", the residual stream in bf16 with hidden dropout"
                    : "")
            << (cfg.predict.rmsnorm == Fusion::eager && cfg.model.family == Family::llama ? ", RMSNorm as eager operators" : "")
            << (cfg.predict.pointwise == Fusion::eager && cfg.model.family == Family::llama
                    ? ", RoPE, repeated K/V heads and SwiGLU as eager operators"
                    : "")
            << (cfg.predict.loss == LossKernels::vocab_parallel ? ", the loss as Megatron-LM's vocab-parallel operators"
                : cfg.predict.loss == LossKernels::cross_entropy ? ", the loss as PyTorch's cross_entropy operators"
                : cfg.predict.loss == LossKernels::xentropy      ? ", the loss as flash-attn's fused cross-entropy kernels"
                                                                 : "")
            << (cfg.predict.logits == LogitsLayout::gathered && cfg.parallel.tp > 1
                    ? ", the logits gathered whole to every TP rank for the loss"
                    : "")
            << (cfg.predict.train_metrics == TrainMetrics::composer_lm
                    ? ", Composer's two training metrics over each micro-batch's logits"
                    : "")
            << (cfg.predict.grad_accumulate != GradAccumulation::fused
                    ? std::string(", gradients accumulated by a ") + name_of(cfg.predict.grad_accumulate) +
                          " after each micro-batch"
                    : std::string())
            << (cfg.predict.bucket_pass == BucketPass::scale ? ", the gradient buffer divided by DP after the pipeline, before its reduction"
                : cfg.predict.bucket_pass == BucketPass::nan_check_scale
                    ? ", each gradient bucket's norm checked for NaN and the bucket scaled before its reduction"
                    : "")
            << (cfg.predict.embedding_grad == EmbeddingGrad::dense ? ", the embedding's gradient made dense each micro-batch"
                : cfg.predict.embedding_grad == EmbeddingGrad::dense_main_grad
                    ? ", the embedding's gradient made dense and added into main_grad each micro-batch"
                    : "")
            << host_text(cfg.predict.host, profile) << sms_text(profile) << published_text(profile)
            << (cfg.predict.memory == MemoryModel::kformer ? "\nmemory estimate per rank: "
                                                             : "\nkformer's own step's memory estimate per rank: ")
            << describe(plan.memory) << "\n"
            << predict_summary_text(report) << largest << breakdown << "  predicted in " << took << " s\n"
            << std::flush;
  if (!cfg.output.json.empty()) write_json(cfg.output.json, report, "output.json", 2);
  if (!cfg.output.trace.empty()) {
    ::mkdir(cfg.output.trace.c_str(), 0755);
    write_json(cfg.output.trace + "/trace.json", predict_trace(p), "output.trace");
  }
  return 0;
}

}  // namespace kformer::predict
