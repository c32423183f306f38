// The JSON report (see report.hpp).
#include "report/report.hpp"

#include <cmath>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <fstream>

#include "comm/allocation_registry.hpp"
#include "platform/device_reduce.hpp"
#include "kformer_config.hpp"
#include "kformer_version.hpp"
#include "plan/memory.hpp"
#include "parallel/schedule.hpp"

namespace kformer {
namespace {

std::string host_cpu() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

nlohmann::json kernel_times_json(const KernelTimes& k) {
  nlohmann::json entries = nlohmann::json::array();
  for (const KernelTime& e : k.entries())
    entries.push_back({{"name", e.name}, {"family", e.family}, {"calls", e.calls}, {"ms", e.ms}});
  return {{"what", "rank 0's kernel calls, each fenced before and after, per timed step (the steps after the "
                   "run's first); outside_calls_ms is the rest of a timed step: communication and the host's own work"},
          {"steps", k.steps()},
          {"step_ms", k.step_ms()},
          {"calls_ms", k.calls_ms()},
          {"outside_calls_ms", k.step_ms() - k.calls_ms()},
          {"by_family_ms", k.family_ms()},
          {"entries", entries}};
}

nlohmann::json mesh_json(const comm::Mesh& m, int world) {
  return {{"world", world},         {"tp", m.shape.tp},         {"pp", m.shape.pp},        {"dp", m.shape.dp},
          {"tp_groups", m.groups.tp}, {"dp_groups", m.groups.dp}, {"pp_groups", m.groups.pp}};
}

nlohmann::json platform_json(int world) {
  char host[256] = "unknown";
  gethostname(host, sizeof(host) - 1);
  return {{"backend", Exec::name()},
          {"kokkos_version", KOKKOS_VERSION},
          {"kformer_version", KFORMER_VERSION},
          {"git", KFORMER_GIT_HASH},
          {"host_cpu", host_cpu()},
          {"host", host},
          {"ranks", world},
          {"threads_per_rank", Exec().concurrency()}};
}

nlohmann::json build_report(const RunPlan& plan, const comm::Mesh& mesh, comm::Communicator& world,
                            const Trainer& trainer, const GemmCeiling& ceiling, const GemmChoice& gemm,
                            const AttentionChoice& attention) {
  const RunSettings& cfg = plan.settings;
  const auto& recs = trainer.records();
  const std::int64_t tokens = std::int64_t(cfg.train.global_batch) * cfg.train.seq_len;
  const Flops per_iteration = trainer.flops_per_iteration();
  const double flops_rank = per_iteration.total();
  const double peak_rank = measured_peak_bytes();  // before the reduction's buffer is allocated
  DeviceReduce reduce;
  const double flops_all = reduce.allreduce(world, flops_rank, comm::ReduceOp::sum);
  const double peak = reduce.allreduce(world, peak_rank, comm::ReduceOp::max);

  // Model FLOPs as Megatron-LM and PaLM count them (model/flops.hpp), over the world's ranks.
  const double model_all = model_flops_per_token(plan.shape, cfg.train.seq_len) * double(tokens);
  const double recompute_all = recompute_flops_per_token(plan.shape, cfg.train.seq_len, cfg.train.recompute,
                                                         plan.attention, fully_recomputed_layers(plan)) *
                               double(tokens);
  nlohmann::json summary = summarize(recs, model_all / world.size(), tokens);
  const double achieved = summary["model_tflops_per_rank"].get<double>();
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  summary["precision"] = name_of(cfg.train.precision);  // FLOPs are counted the same in both
  summary["gemm_ceiling_tflops"] = ceiling.tflops;
  summary["gemm_ceiling"] = {{"impl", ceiling.impl},
                             {"precision", name_of(ceiling.precision)},
                             {"shape", ceiling.shape},
                             {"native_tflops", ceiling.native_tflops},
                             {"vendor_tflops", ceiling.vendor_tflops},
                             {"of_fma_peak", ratio(ceiling.tflops, ceiling.fma.tflops)}};
  // The GEMM the run used and why (kernels.gemm=auto: the rates it compared, averaged over ranks).
  summary["kernels_gemm"] = {{"setting", name_of(gemm.setting)},
                             {"impl", kernels::to_string(gemm.impl)},
                             {"reason", gemm.reason},
                             {"precision", name_of(gemm.precision)},
                             {"native_tflops", gemm.native_tflops},
                             {"vendor_tflops", gemm.vendor_tflops}};
  // The attention kernel and why (kernels.attention=auto: the fwd+bwd rates it compared, 0 = not a
  // candidate, and how far each candidate's results lay from the nearest other's; null: not finite).
  nlohmann::json rates = nlohmann::json::object(), diffs = nlohmann::json::object();
  for (int k = 0; k < kernels::kAttentionKinds; ++k) {
    if (attention.tflops[k] <= 0) continue;
    const char* kind = name_of(static_cast<AttentionKind>(k));
    rates[kind] = attention.tflops[k];
    diffs[kind] = std::isfinite(attention.diffs[k]) ? nlohmann::json(attention.diffs[k]) : nlohmann::json();
  }
  summary["kernels_attention"] = {{"setting", name_of(attention.setting)}, {"kind", name_of(plan.attention)},
                                  {"reason", attention.reason},           {"precision", name_of(attention.precision)},
                                  {"timed_at", attention.timed_at},       {"tflops", rates},
                                  {"differences", diffs}};
  summary["mfu"] = ratio(achieved, ceiling.tflops);
  // Hardware FLOPs add the recomputed forward work (train.recompute): HFU beside MFU.
  const double hardware = achieved * ratio(model_all + recompute_all, model_all);
  summary["hardware_tflops_per_rank"] = hardware;
  summary["hfu"] = ratio(hardware, ceiling.tflops);
  summary["mfu_vendor"] = ratio(achieved, ceiling.vendor_tflops);
  summary["fma_peak_tflops"] = ceiling.fma.tflops;
  summary["fma_peak"] = {{"chains_per_item", ceiling.fma.chains},
                         {"work_items", ceiling.fma.work_items},
                         {"launch_ms", ceiling.fma.seconds * 1e3}};
  summary["mfu_fma_peak"] = ratio(achieved, ceiling.fma.tflops);
  if (cfg.output.peak_tflops > 0) summary["mfu_peak"] = achieved / cfg.output.peak_tflops;
  summary["flops"] = {{"convention", "Megatron-LM/PaLM: 6 N + 12 L T (H hd) per token, whole model, over the ranks"},
                      {"model_per_iteration_all_ranks", model_all},
                      {"recompute_per_iteration_all_ranks", recompute_all},
                      {"counted_per_iteration_rank", flops_rank},
                      {"counted_per_iteration_all_ranks", flops_all},
                      {"recompute_per_iteration_rank", per_iteration.recompute},
                      {"closed_form_per_iteration", closed_form_flops_per_token(plan.shape, cfg.train.seq_len) *
                                                        double(tokens)}};
  const int pp = cfg.parallel.pp, v = cfg.parallel.virtual_stages, m = cfg.parallel.microbatches;
  std::size_t slots = 0;
  for (const auto& st : trainer.stages()) slots = std::max(slots, st->slots_allocated());
  const double slots_all = reduce.allreduce(world, double(slots), comm::ReduceOp::max);
  summary["pipeline"].update({{"schedule", name_of(cfg.parallel.schedule)},
                              {"stages", pp},
                              {"virtual_stages", v},
                              {"microbatches", m},
                              {"bubble_analytic", analytic_bubble(cfg.parallel.schedule, pp, m, v)},
                              {"micro_batches_in_flight_measured", slots_all}});
  nlohmann::json memory = plan.memory.to_json();
  memory["peak_bytes"] = peak;
  // What the estimate predicts: the high-water mark of kformer's own allocations (Kokkos Views).
  memory["allocated_peak_bytes"] =
      reduce.allreduce(world, double(comm::AllocationRegistry::peak_bytes()), comm::ReduceOp::max);
  double acts = 0;
  for (const auto& st : trainer.stages()) acts += double(st->activation_bytes());
  memory["activation_bytes_measured"] = reduce.allreduce(world, acts, comm::ReduceOp::max);
  summary["memory"] = memory;

  if (const KernelTimes* k = trainer.kernel_times()) summary["kernel_times"] = kernel_times_json(*k);

  nlohmann::json iters = nlohmann::json::array();
  for (const auto& r : recs) iters.push_back(iteration_json(r));
  nlohmann::json platform = platform_json(world.size());
  // Which backend ran and why (comm.backend=auto picks it: comm/backend_choice.hpp).
  const std::string& why = cfg.comm.auto_reason;
  platform["comm"] = {{"backend", cfg.comm.backend},
                      {"requested", why.empty() ? cfg.comm.backend : "auto"},
                      {"reason", why.empty() ? "as asked" : why},
                      {"communicator", world.backend()}};
  return {{"config", cfg.deck.json},
          {"mesh", mesh_json(mesh, world.size())},
          {"platform", platform},
          {"iterations", iters},
          {"summary", summary}};
}

}  // namespace kformer
