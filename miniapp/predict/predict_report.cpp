// The predicted report, summary text and trace (see predict_report.hpp).
#include "predict/predict_report.hpp"

#include <algorithm>
#include <sstream>

#include "model/flops.hpp"
#include "plan/memory.hpp"
#include "train/metrics.hpp"
#include "model/model_spec.hpp"
#include "parallel/schedule.hpp"
#include "predict/attention_auto.hpp"
#include "predict/kernel_costs.hpp"
#include "predict/software_memory.hpp"
#include "report/summary_text.hpp"
#include "settings/systems.hpp"

namespace kformer::predict {
double predicted_peak_bytes(const RunPlan& plan, const MachineProfile& prof) {
  const double baseline = prof.process_baseline_gb * 1e9;
  if (plan.settings.predict.memory != MemoryModel::kformer)
    return software_memory(plan.settings, plan.shape).peak().bytes + baseline;
  return plan.memory.total() + baseline;
}

nlohmann::json predict_report(const RunPlan& plan, const MachineProfile& prof, const StepPrediction& p) {
  const RunSettings& cfg = plan.settings;
  const int tp = cfg.parallel.tp, pp = cfg.parallel.pp, dp = cfg.parallel.dp;
  const int v = cfg.parallel.virtual_stages, m = cfg.parallel.microbatches;
  const std::int64_t tokens = std::int64_t(cfg.train.global_batch) * cfg.train.seq_len;
  // Model FLOPs as a run reports them (model/flops.hpp: Megatron-LM's and PaLM's convention).
  const double model_all = model_flops_per_token(plan.shape, cfg.train.seq_len) * double(tokens);
  const double recompute_all = recompute_flops_per_token(plan.shape, cfg.train.seq_len, cfg.train.recompute,
                                                         plan.attention, fully_recomputed_layers(plan)) *
                               double(tokens);
  const double model_rank = model_all / (double(tp) * pp * dp);
  const bool host_costed = prof.eager_host.costs(cfg.predict.host);
  IterationRecord r;
  r.iteration = 1, r.total = 1, r.global_batch = cfg.train.global_batch;
  r.elapsed_s = p.step_ms / 1e3;
  r.tokens_per_s = tokens / r.elapsed_s;
  r.samples_per_s = r.global_batch / r.elapsed_s;
  r.tflops_per_rank = model_rank / r.elapsed_s / 1e12;
  r.forward_ms = p.rank0.forward_ms, r.backward_ms = p.rank0.backward_ms, r.optimizer_ms = p.rank0.optimizer_ms;
  r.comm_total_ms = p.rank0.comm_total_ms, r.comm_exposed_ms = p.rank0.comm_exposed_ms;
  r.pipeline_wall_ms = p.rank0.pipeline_wall_ms, r.pipeline_compute_ms = p.rank0.pipeline_compute_ms;
  r.rank_busy_ms = p.rank_busy_ms, r.rank_comm_ms = p.rank_comm_ms, r.rank_bubble = p.rank_bubble;

  nlohmann::json s = summarize({r}, model_rank, tokens);
  const double achieved = s["model_tflops_per_rank"].get<double>(), gemm = prof.rates(cfg.bf16()).best_gemm_tflops();
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  s["gemm_ceiling_tflops"] = gemm;
  s["precision"] = name_of(cfg.train.precision);
  s["gemm_ceiling"] = {{"impl", "profile"},
                       {"shape", "its best shape"},
                       {"precision", name_of(cfg.train.precision)},
                       {"of_fma_peak", ratio(gemm, prof.fma_peak_tflops)}};
  // MFU and HFU against the profile's peak in the run's precision (bf16: the tensor cores'), the
  // convention of the papers the published rows come from; the profile's best GEMM stays beside it.
  const double peak_tflops = prof.rates(cfg.bf16()).gemm_peak_tflops > 0 ? prof.rates(cfg.bf16()).gemm_peak_tflops : gemm;
  s["peak_tflops"] = peak_tflops;
  s["mfu"] = ratio(achieved, peak_tflops);
  s["mfu_gemm_ceiling"] = ratio(achieved, gemm);
  s["hardware_tflops_per_rank"] = achieved * ratio(model_all + recompute_all, model_all);
  s["hfu"] = ratio(s["hardware_tflops_per_rank"].get<double>(), peak_tflops);
  s["fma_peak_tflops"] = prof.fma_peak_tflops;
  s["mfu_fma_peak"] = ratio(achieved, prof.fma_peak_tflops);
  if (cfg.output.peak_tflops > 0) s["mfu_peak"] = achieved / cfg.output.peak_tflops;
  double flops_all = 0;  // every stage's FLOPs, over its dp*tp replicas: the rank-0 column times dp*tp
  {
    const ModelShape& shape = plan.shape;
    const BlockDims& d = plan.dims;
    for (const auto& c : plan.chunks) flops_all += block_flops(d).total() * c.second;
    flops_all += head_flops(d.N(), d.C, shape.vocab_padded / shape.tp).total();
    flops_all *= double(m) * dp * tp;
  }
  s["flops"] = {{"convention", "Megatron-LM/PaLM: 6 N + 12 L T (H hd) per token, whole model, over the ranks"},
                {"model_per_iteration_all_ranks", model_all},
                {"recompute_per_iteration_all_ranks", recompute_all},
                {"counted_per_iteration_rank", p.flops_rank0},
                {"counted_per_iteration_all_ranks", flops_all},
                {"closed_form_per_iteration",
                 closed_form_flops_per_token(plan.shape, cfg.train.seq_len) * double(tokens)}};
  s["pipeline"].update({{"schedule", name_of(cfg.parallel.schedule)},
                        {"stages", pp},
                        {"virtual_stages", v},
                        {"microbatches", m},
                        {"bubble_analytic", analytic_bubble(cfg.parallel.schedule, pp, m, v)},
                        {"bubble_predicted", s["pipeline"]["bubble_measured"]}});
  const MemoryEstimate& e = plan.memory;
  nlohmann::json mem = e.to_json();
  const double baseline = prof.process_baseline_gb * 1e9, peak = predicted_peak_bytes(plan, prof);
  mem["peak_bytes"] = peak;  // as predict.memory counts it
  mem["process_baseline_bytes"] = baseline;
  mem["device_bytes"] = device_bytes(cfg, prof);
  mem["fits"] = within_device(peak, mem["device_bytes"].get<double>());
  mem["counted_as"] = name_of(cfg.predict.memory);
  if (cfg.predict.memory != MemoryModel::kformer) {  // the software's count; kformer's own step's beside it
    mem["kformer_peak_bytes"] = e.total() + baseline;
    mem["software"] = software_memory(cfg, plan.shape).to_json();
  }
  s["memory"] = mem;
  s["pipeline"]["micro_batches_in_flight_predicted"] = e.micro_batches_in_flight;
  const ComputeRates& rates = prof.rates(cfg.bf16());
  const int t = cfg.train.seq_len, hd = plan.shape.head_dim;

  return {{"config", cfg.deck.json},
          {"mesh", {{"world", tp * pp * dp}, {"tp", tp}, {"pp", pp}, {"dp", dp}}},
          {"platform", {{"machine", prof.name}, {"profile", prof.source}, {"ranks", tp * pp * dp}}},
          {"predicted",
           {{"machine", prof.name},
            {"profile", prof.source},
            {"system", cfg.predict.system},
            {"system_what", software_system(cfg.predict.system).what},
            {"attention", name_of(cfg.predict.attention)},
            // the kernels kformer's own run takes there (kernels.attention and kernels.gemm as resolved), and
            // the build whose code the step describes: cuda for kformer's own run on a GPU's profile (own_build.hpp)
            {"kernels", {{"attention", name_of(plan.attention)}, {"gemm", kernels::to_string(plan.gemm)},
                         {"build", kformer_build_name(plan.code_path)}}},
            // the rates flash, triton and cudnn are costed at, at the deck's sequence length and head size
            // (cudnn's at 128); 0: the GEMM curve
            {"flash2_tflops", rates.flash2_tflops.at(hd, t)},
            {"triton_tflops", rates.triton_tflops.at(hd, t)},
            {"cudnn_tflops",
             {{"forward", rates.cudnn_forward_tflops.at(t)}, {"backward", rates.cudnn_backward_tflops.at(t)}}},
            // batched_gemm's floor, forward and backward together over every score, at the deck's T and head size
            {"batched_gemm_tflops", batched_gemm_rate(rates, t, hd)},
            // the SMs a collective holds beside compute, within a node and across nodes, of the device's; 0: not charged
            {"collective_sms", {{"device", prof.sms}, {"intra_node", prof.collective_sms_intra},
                                {"inter_node", prof.collective_sms_inter}}},
            {"pipeline_p2p", name_of(cfg.predict.pipeline_p2p)},
            {"grad_reduce", name_of(cfg.predict.grad_reduce)},
            {"tp_comm", name_of(cfg.predict.tp_comm)},
            {"tp_input_grad", name_of(cfg.predict.tp_input_grad)},
            {"tp_precision", name_of(cfg.predict.tp_precision)},
            {"attention_dropout", cfg.predict.attention_dropout},
            {"param_gather", name_of(cfg.predict.param_gather)},
            {"gather_copy", name_of(cfg.predict.gather_copy)},
            {"scatter_copy", name_of(cfg.predict.scatter_copy)},
            {"zero3_gather", name_of(cfg.predict.zero3_gather)},
            {"pipeline_messages", name_of(cfg.predict.pipeline_messages)},
            {"pipeline_calls", name_of(cfg.predict.pipeline_calls)},
            {"residual", name_of(cfg.predict.residual)},
            {"rmsnorm", name_of(cfg.predict.rmsnorm)},
            {"pointwise", name_of(cfg.predict.pointwise)},
            {"loss", name_of(cfg.predict.loss)},
            {"logits", name_of(cfg.predict.logits)},
            {"grad_accumulate", name_of(cfg.predict.grad_accumulate)},
            {"bucket_pass", name_of(cfg.predict.bucket_pass)},
            {"embedding_grad", name_of(cfg.predict.embedding_grad)},
            {"host", name_of(cfg.predict.host)},
            {"host_costed", host_costed},
            // where the costed host figures come from (a run of bench/eager_op_cost.py, or what the profile says)
            {"host_source", host_costed ? prof.eager_host.source : std::string()},
            // rank 0's compute by kernel family (and the passes the costed software adds), each at the
            // profile's cost (step_sim.hpp: rank0_kernel_ms)
            {"kernel_ms_by_family", p.rank0_kernel_ms},
            // how the published runs on this profile came out (its published_accuracy; rows 0: none checks it)
            {"published_accuracy", {{"rows", prof.published.rows}, {"median_abs_pct", prof.published.median_abs_pct},
                                    {"mean_signed_pct", prof.published.mean_signed_pct},
                                    {"note", prof.published.note}}},
            {"fits", mem["fits"]}}},
          {"iterations", nlohmann::json::array({iteration_json(r)})},
          {"summary", s}};
}

std::string predict_summary_text(const nlohmann::json& report) {
  const nlohmann::json& s = report["summary"];
  std::istringstream in(format_summary(s));
  std::string out, line;
  const auto replace_all = [](std::string x, const std::string& a, const std::string& b) {
    for (std::size_t at = x.find(a); at != std::string::npos; at = x.find(a, at + b.size())) x.replace(at, a.size(), b);
    return x;
  };
  while (std::getline(in, line)) {
    if (line.rfind("summary (", 0) == 0) {
      out += "summary (predicted for one step on " + report["predicted"]["machine"].get<std::string>() +
             "; output.json has every field):\n";
      continue;
    }
    if (line.find("ceilings") != std::string::npos) continue;  // the profile has no native/vendor split
    if (line.rfind("  memory per rank", 0) == 0 && s["memory"].contains("software")) {  // predict.memory's count
      const auto& mem = s["memory"];
      const auto& sw = mem["software"];
      std::ostringstream m;
      m.precision(3);
      m << "  memory per rank  predicted peak " << mem["peak_bytes"].get<double>() / 1e9 << " GB as "
        << sw["model"].get<std::string>() << " counts it (at " << sw["peak_moment"].get<std::string>()
        << ", with the profile's process baseline); kformer's own step " << mem["kformer_peak_bytes"].get<double>() / 1e9
        << " GB";
      out += m.str() + "\n";
      continue;
    }
    if (line.rfind("  MFU ", 0) == 0) {  // against the peak of the run's precision (predict_report)
      std::ostringstream m;
      m.precision(4);
      const std::string precision = s["precision"].get<std::string>();
      m << "  MFU              " << s["mfu"].get<double>() << " of the profile's " << precision << " peak ("
        << s["peak_tflops"].get<double>() << " TFLOP/s); " << s["mfu_gemm_ceiling"].get<double>()
        << " of its best GEMM (" << s["gemm_ceiling_tflops"].get<double>() << " TFLOP/s)";
      if (precision == "fp32" && s["fma_peak_tflops"].get<double>() > 0)
        m << "; " << s["mfu_fma_peak"].get<double>() << " of its FMA peak (" << s["fma_peak_tflops"].get<double>()
          << " TFLOP/s)";
      if (s.contains("mfu_peak")) m << "; " << s["mfu_peak"].get<double>() << " of output.peak_tflops";
      if (s["hfu"].get<double>() > s["mfu"].get<double>()) m << "; HFU " << s["hfu"].get<double>() << " with the recomputed work";
      out += m.str() + "\n";
      continue;
    }
    line = replace_all(line, "of the best GEMM measured", "of the profile's best GEMM");
    line = replace_all(line, "of the FMA peak measured", "of its FMA peak");
    line = replace_all(line, "measured peak", "predicted peak");
    line = replace_all(line, "measured", "predicted");
    out += line + "\n";
  }
  const auto& mem = s["memory"];
  std::ostringstream v;
  v.precision(3);
  if (mem["device_bytes"].get<double>() <= 0)
    v << "  fits             unknown: the profile gives no memory_gb and memory.limit_gb is unset\n";
  else {
    v << "  fits             " << (mem["fits"].get<bool>() ? "yes" : "NO: does not fit") << " ("
      << mem["peak_bytes"].get<double>() / 1e9 << " GB predicted peak per rank of "
      << mem["device_bytes"].get<double>() / 1e9 << " GB per device)\n";
    // The peak is kformer's own step's at this layout whatever system the time was costed for: say
    // so where the two differ (docs/predict-published.md, "Memory against what the sources published").
    const std::string system = report["predicted"].value("system", std::string("kformer"));
    if (system != "kformer" && !mem.contains("software"))
      v << "                   (kformer's own step's peak at this layout, not " << system
        << "'s; docs/predict-published.md, \"Memory against what the sources published\")\n";
  }
  return out + v.str();
}

nlohmann::json predict_trace(const StepPrediction& p) {
  nlohmann::json ev = nlohmann::json::array();
  for (std::size_t i = 0; i < p.traced_ranks.size(); ++i) {
    const int rank = p.traced_ranks[i];
    ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", "rank " + std::to_string(rank) + " (predicted)"}}}});
    ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", "compute"}}}});
    ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 1}, {"args", {{"name", "communication"}}}});
    for (const SimSpan& s : p.spans[i]) {
      nlohmann::json args = {{"iteration", 1}};
      if (s.micro >= 0) args["micro_batch"] = s.micro, args["chunk"] = s.chunk;
      if (s.head) args["part"] = "loss and head";
      if (s.comm) args["bytes"] = s.bytes;
      ev.push_back({{"name", s.name}, {"cat", s.comm ? "comm" : "compute"}, {"ph", "X"}, {"pid", rank},
                    {"tid", s.comm ? 1 : 0}, {"ts", s.start_us}, {"dur", s.end_us - s.start_us}, {"args", args}});
    }
  }
  return {{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
}

}  // namespace kformer::predict
