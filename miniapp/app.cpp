// The run of one deck (see app.hpp).
#include "app.hpp"

#include <Kokkos_Core.hpp>
#include <Kokkos_Timer.hpp>

#include <iostream>

#include "comm/allocation_registry.hpp"
#include "comm/mesh.hpp"
#include "checkpoint/checkpoint.hpp"
#include "settings/read_settings.hpp"
#include "settings/world_options.hpp"
#include "platform/device.hpp"
#include "platform/device_reduce.hpp"
#include "platform/errors.hpp"
#include "measure/attention_rates.hpp"
#include "measure/gemm_choice.hpp"
#include "plan/gpu_memory.hpp"
#include "platform/gpu_placement.hpp"
#include "plan/memory.hpp"
#include "report/reference_export.hpp"
#include "report/report.hpp"
#include "platform/stop_signals.hpp"
#include "report/summary_text.hpp"
#include "report/timeline.hpp"
#include "train/make_plan.hpp"
#include "train/trainer.hpp"

namespace kformer {
RunPlan load_plan(const CliArgs& args, int world_size) {
  RunPlan plan = plan_without_memory(load_settings(args.deck, args.overrides, world_size));
  if (plan.settings.kernels.attention == AttentionSetting::vendor && !attention_vendor_built())
    throw ConfigError("kernels.attention=vendor needs cuDNN's flash attention, which this kformer was built without "
                      "(a CUDA build with cuDNN: scripts/setup.sh --cuda, cmake --preset cuda): use "
                      "kernels.attention=auto, fused or batched_gemm");
  const RunSettings& s = plan.settings;
  make_data_source(s.data_source, s.model.vocab_size, s.train.seed)->check(s.train.seq_len);
  return plan;
}

namespace {

// The start-up lines about GPUs: rank 0's own, or in a dry run every rank's (the seats were
// gathered before Kokkos started). Empty in host builds.
std::string gpu_lines(const std::vector<GpuSeat>& gpus, bool every_rank) {
  if (gpus.empty()) return "";
  if (!every_rank) {
    std::string line = "gpu: " + describe_seat(gpus.front());
    if (gpus.front().device < 0) line += ", runs on GPU " + std::to_string(current_gpu());
    return line + "\n";
  }
  std::string out = "gpus:\n";
  for (const auto& s : gpus) out += "  " + describe_seat(s) + "\n";
  return out;
}

// kernels.gemm resolved from the start-up ceiling's timings; for `auto` each rate is averaged over
// the ranks first, so that every rank takes the same GEMM.
GemmChoice resolve_gemm(GemmSetting setting, const GemmCeiling& ceiling, comm::Communicator& world) {
  std::vector<double> rates{ceiling.native_tflops, ceiling.vendor_tflops};
  if (setting == GemmSetting::automatic && world.size() > 1) {
    DeviceReduce().allreduce(world, rates, comm::ReduceOp::sum);
    for (double& r : rates) r /= world.size();
  }
  return choose_gemm(setting, rates[0], rates[1], ceiling.precision);
}

// kernels.attention resolved. auto times the kinds this build runs in the run's precision whose
// memory estimate fits, at the start-up shape (attention_rates.hpp); each rate is averaged over the
// ranks, and a kind some rank could not take is out on every rank, as is one whose results some
// rank saw apart from the others' (the widest difference over the ranks).
AttentionChoice resolve_attention(const RunPlan& plan, const NodeMemory& node, comm::Communicator& world) {
  const RunSettings& cfg = plan.settings;
  const Precision precision = cfg.train.precision;
  if (cfg.kernels.attention != AttentionSetting::automatic)
    return choose_attention(cfg.kernels.attention, {}, precision, "", plan.attention);
  std::vector<AttentionKind> candidates;
  for (const AttentionKind k : attention_kinds_built(precision)) {
    try {
      check_plan_fits(with_attention(plan, k), node);
      candidates.push_back(k);
    } catch (const ConfigError&) {  // too big for this run: not a candidate
    }
  }
  // About a second of host work per candidate at the budget; a GPU's budget fills it.
  const double budget = kernels::runs_on_host<Exec> ? 1e9 : 2e11;
  const BlockDims shape = startup_attention_shape(plan.dims, budget);
  AttentionTrial trial = measure_attention_candidates(shape, precision, candidates);
  AttentionRates& rates = trial.tflops;
  if (world.size() > 1) {
    std::vector<double> sums(rates.begin(), rates.end()), least(rates.size());  // least: negated, whose max is the least
    for (std::size_t k = 0; k < rates.size(); ++k) least[k] = -rates[k];
    std::vector<double> diffs(trial.diffs.begin(), trial.diffs.end());  // the widest over the ranks
    DeviceReduce().allreduce(world, sums, comm::ReduceOp::sum);
    DeviceReduce().allreduce(world, least, comm::ReduceOp::max);
    DeviceReduce().allreduce(world, diffs, comm::ReduceOp::max);
    for (std::size_t k = 0; k < rates.size(); ++k) {
      rates[k] = -least[k] > 0 ? sums[k] / world.size() : 0;
      trial.diffs[k] = diffs[k];
    }
  }
  return choose_attention(cfg.kernels.attention, rates, precision, describe_shape(shape), plan.attention, trial.diffs);
}

}  // namespace

int run_app(const CliArgs& args, const RunPlan& layout, comm::Runtime& runtime, const std::vector<GpuSeat>& gpus) {
  const RunSettings& cfg = layout.settings;
  check_kokkos_took_seat(gpus, runtime.world_rank());  // before any allocation on the wrong GPU
  comm::AllocationRegistry::install();  // the peak of what kformer allocates (report.cpp), and comm.strict's checks
  // The memory estimate describes a step of the plan, which takes Kokkos: every rank reaches the
  // same verdict (a ConfigError is reported once, by rank 0).
  const RunPlan given_plan = with_memory(layout);
  check_plan_fits(given_plan, probe_node_memory(runtime.ranks_on_node()));
  std::unique_ptr<comm::Communicator> world;
  auto trace = std::make_shared<comm::TraceLog>();
  try {
    comm::WorldOptions options = world_options(cfg.comm);
    options.trace = trace;
    world = comm::make_world(cfg.comm.backend, runtime, options);
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());  // the same verdict on every rank: report it once
  }
  comm::Mesh mesh = comm::build_mesh(*world, {cfg.parallel.dp, cfg.parallel.pp, cfg.parallel.tp});

  // The ceilings (and kernels.gemm=auto's choice, from the same timings) are measured before the
  // trainer allocates, at its first stage's layer shape; a dry run times them only for auto. So
  // are kernels.attention=auto's candidates, whose winner the plan then takes.
  GemmCeiling ceiling;
  if (!args.dry_run || cfg.kernels.gemm == GemmSetting::automatic)
    ceiling = measure_gemm_ceiling(given_plan.dims, cfg.train.precision);
  const GemmChoice gemm = resolve_gemm(cfg.kernels.gemm, ceiling, *world);
  const AttentionChoice attention = resolve_attention(given_plan, probe_node_memory(runtime.ranks_on_node()), *world);
  const RunPlan plan = with_gemm(with_attention(given_plan, attention.kind), gemm.impl);

  if (world->rank() == 0) {
    std::cout << "kformer: deck " << args.deck << " on " << world->size() << " rank(s), comm " << world->backend()
              << ", Kokkos " << Kokkos::DefaultExecutionSpace::name() << "\n"
              << gpu_lines(gpus, args.dry_run) << "resolved configuration:\n"
              << cfg.deck.text({{"kernels.gemm", describe(gemm)}, {"kernels.attention", describe(attention)}}) << "mesh: dp=" << mesh.shape.dp << " pp=" << mesh.shape.pp
              << " tp=" << mesh.shape.tp << "\n"
              << "  tp groups " << comm::format_groups(mesh.groups.tp) << "\n"
              << "  dp groups " << comm::format_groups(mesh.groups.dp) << "\n"
              << "  pp groups " << comm::format_groups(mesh.groups.pp) << "\n"
              << "memory estimate per rank: " << describe(plan.memory) << std::endl;
  }
#if defined(KOKKOS_ENABLE_CUDA)
  check_fits_gpus(plan, *world, gpu_memory_bytes());  // one allreduce: host builds skip it (no trace entry)
#endif
  if (args.dry_run) return 0;

  Trainer trainer(plan, *world, mesh, trace);
  if (!cfg.checkpoint.load.empty()) {
    const std::string dir = resolve_checkpoint_dir(cfg.checkpoint.load);
    Kokkos::Timer load_timer;
    const TrainingPosition at = load_checkpoint(dir, trainer.checkpoint_context());
    const double load_s = load_timer.seconds();
    const int steps = cfg.train.steps, stop_at = cfg.train.stop_at;
    if (at.iteration >= steps || (stop_at > 0 && at.iteration >= stop_at))
      throw ConfigError("checkpoint " + dir + " is at iteration " +
                        std::to_string(at.iteration) + " and " + (at.iteration >= steps ? "train.steps" : "train.stop_at") +
                        " counts from the start of the run: raise it above " + std::to_string(at.iteration));
    trainer.resume(at);
    if (world->rank() == 0)
      std::cout << "checkpoint: resumed from " << dir << " after iteration "
                << at.iteration << " (" << at.consumed_samples << " samples consumed) in " << load_s
                << " s; continuing at iteration " << at.iteration + 1 << std::endl;
  }
  if (!cfg.checkpoint.save.empty()) {
    prepare_checkpoint_root(cfg.checkpoint.save, *world);
    trainer.save_checkpoint = [&](const TrainingPosition& at) {
      save_checkpoint(cfg.checkpoint.save, at, trainer.checkpoint_context());
    };
  }
  install_stop_signals(world->rank());
  if (!cfg.output.export_dir.empty())
    trainer.after_backward = [&](int it) {  // the first iteration of this run, from its first sample
      if (it != trainer.first_iteration()) return;
      const auto data = make_data_source(cfg.data_source, cfg.model.vocab_size, cfg.train.seed);
      export_reference(cfg.output.export_dir, trainer.params(), *data, trainer.first_sample(), cfg.train.global_batch,
                       cfg.train.seq_len);
    };
  std::unique_ptr<Timeline> timeline;
  if (!cfg.output.trace.empty()) {
    timeline = std::make_unique<Timeline>(cfg.output.trace, world->rank());
    trainer.after_iteration = [&](const IterationRecord& r) {
      timeline->add_iteration(int(r.iteration), trainer.pipeline().spans, *trace, r.optimizer_start_us,
                              r.optimizer_end_us);
    };
  }
  comm::AllocationRegistry::reset_peak();  // the ceiling's benchmark buffers are not the run's
  trainer.run();
  if (timeline) timeline->write(*world);
  const nlohmann::json report = build_report(plan, mesh, *world, trainer, ceiling, gemm, attention);
  if (world->rank() == 0) {
    std::cout << format_summary(report["summary"]) << std::flush;
    if (!cfg.output.json.empty()) write_json(cfg.output.json, report, "output.json", 2);
  }
  world->barrier();
  return 0;
}

}  // namespace kformer
