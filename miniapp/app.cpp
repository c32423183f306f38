// The run of one deck (see app.hpp).
#include "app.hpp"

#include <Kokkos_Core.hpp>
#include <Kokkos_Timer.hpp>

#include <iostream>

#include "comm/allocation_registry.hpp"
#include "comm/mesh.hpp"
#include "checkpoint.hpp"
#include "config.hpp"
#include "device_reduce.hpp"
#include "errors.hpp"
#include "gemm_choice.hpp"
#include "gpu_memory.hpp"
#include "gpu_placement.hpp"
#include "memory.hpp"
#include "reference_export.hpp"
#include "report.hpp"
#include "stop_signals.hpp"
#include "summary_text.hpp"
#include "timeline.hpp"
#include "trainer.hpp"
#include "validate.hpp"

namespace kformer {
Config load_config(const CliArgs& args, int world_size, int ranks_on_node) {
  Config cfg;
  cfg.load_deck_file(args.deck);
  for (const auto& o : args.overrides) cfg.apply_override(o);
  resolve_and_validate(cfg, world_size, probe_node_memory(ranks_on_node));
  make_data_source(cfg.str("data.source"), cfg.i64("model.vocab_size"), cfg.i64("train.seed"))
      ->check(cfg.i32("train.seq_len"));
  return cfg;
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
GemmChoice resolve_gemm(const std::string& setting, const GemmCeiling& ceiling, comm::Communicator& world) {
  std::vector<double> rates{ceiling.native_tflops, ceiling.vendor_tflops};
  if (setting == "auto" && world.size() > 1) {
    DeviceReduce().allreduce(world, rates, comm::ReduceOp::sum);
    for (double& r : rates) r /= world.size();
  }
  return choose_gemm(setting, rates[0], rates[1], ceiling.precision);
}

}  // namespace

comm::WorldOptions world_options(const Config& cfg) {
  comm::WorldOptions options;
  options.emulate = {cfg.f64("comm.emulate.latency_us"), cfg.f64("comm.emulate.bandwidth_gbps")};
  options.timeout_s = cfg.f64("comm.timeout_s");
  options.strict = cfg.str("comm.strict") == "true";
  return options;
}

int run_app(const CliArgs& args, const Config& cfg, comm::Runtime& runtime, const std::vector<GpuSeat>& gpus) {
  check_kokkos_took_seat(gpus, runtime.world_rank());  // before any allocation on the wrong GPU
  comm::AllocationRegistry::install();  // the peak of what kformer allocates (report.cpp), and comm.strict's checks
  std::unique_ptr<comm::Communicator> world;
  auto trace = std::make_shared<comm::TraceLog>();
  try {
    comm::WorldOptions options = world_options(cfg);
    options.trace = trace;
    world = comm::make_world(cfg.str("comm.backend"), runtime, options);
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());  // the same verdict on every rank: report it once
  }
  comm::Mesh mesh = comm::build_mesh(
      *world, {cfg.i32("parallel.dp"), cfg.i32("parallel.pp"), cfg.i32("parallel.tp")});

  // The ceilings (and kernels.gemm=auto's choice, from the same timings) are measured before the
  // trainer allocates, at its first stage's layer shape; a dry run times them only for auto.
  const std::string gemm_setting = cfg.str("kernels.gemm");
  const bool automatic = gemm_setting == "auto";
  GemmCeiling ceiling;
  if (!args.dry_run || automatic)
    ceiling = measure_gemm_ceiling(
        block_dims(model_shape(cfg), cfg.i32("train.micro_batch"), cfg.i32("train.seq_len")),
        cfg.str("train.precision") == "bf16");
  const GemmChoice gemm = resolve_gemm(gemm_setting, ceiling, *world);
  std::map<std::string, std::string> resolved;
  if (automatic) resolved["kernels.gemm"] = describe(gemm);

  if (world->rank() == 0) {
    std::cout << "kformer: deck " << args.deck << " on " << world->size() << " rank(s), comm " << world->backend()
              << ", Kokkos " << Kokkos::DefaultExecutionSpace::name() << "\n"
              << gpu_lines(gpus, args.dry_run) << "resolved configuration:\n"
              << cfg.to_text(resolved) << "mesh: dp=" << mesh.shape.dp << " pp=" << mesh.shape.pp
              << " tp=" << mesh.shape.tp << "\n"
              << "  tp groups " << comm::format_groups(mesh.groups.tp) << "\n"
              << "  dp groups " << comm::format_groups(mesh.groups.dp) << "\n"
              << "  pp groups " << comm::format_groups(mesh.groups.pp) << "\n"
              << "memory estimate per rank: " << describe(estimate_memory(cfg)) << std::endl;
  }
#if defined(KOKKOS_ENABLE_CUDA)
  check_fits_gpus(cfg, *world, gpu_memory_bytes());  // one allreduce: host builds skip it (no trace entry)
#endif
  if (args.dry_run) return 0;

  Trainer trainer(cfg, *world, mesh, trace, gemm.impl);
  if (!cfg.str("checkpoint.load").empty()) {
    const std::string dir = resolve_checkpoint_dir(cfg.str("checkpoint.load"));
    Kokkos::Timer load_timer;
    const TrainingPosition at = load_checkpoint(dir, trainer.checkpoint_context());
    const double load_s = load_timer.seconds();
    const int steps = cfg.i32("train.steps"), stop_at = cfg.i32("train.stop_at");
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
  if (!cfg.str("checkpoint.save").empty()) {
    prepare_checkpoint_root(cfg.str("checkpoint.save"), *world);
    trainer.save_checkpoint = [&](const TrainingPosition& at) {
      save_checkpoint(cfg.str("checkpoint.save"), at, trainer.checkpoint_context());
    };
  }
  install_stop_signals(world->rank());
  if (!cfg.str("output.export").empty())
    trainer.after_backward = [&](int it) {  // the first iteration of this run, from its first sample
      if (it != trainer.first_iteration()) return;
      const auto data = make_data_source(cfg.str("data.source"), cfg.i64("model.vocab_size"), cfg.i64("train.seed"));
      export_reference(cfg.str("output.export"), trainer.params(), *data, trainer.first_sample(),
                       cfg.i32("train.global_batch"), cfg.i32("train.seq_len"));
    };
  std::unique_ptr<Timeline> timeline;
  if (!cfg.str("output.trace").empty()) {
    timeline = std::make_unique<Timeline>(cfg.str("output.trace"), world->rank());
    trainer.after_iteration = [&](const IterationRecord& r) {
      timeline->add_iteration(int(r.iteration), trainer.pipeline().spans, *trace, r.optimizer_start_us,
                              r.optimizer_end_us);
    };
  }
  comm::AllocationRegistry::reset_peak();  // the ceiling's benchmark buffers are not the run's
  trainer.run();
  if (timeline) timeline->write(*world);
  const nlohmann::json report = build_report(cfg, mesh, *world, trainer, ceiling, gemm);
  if (world->rank() == 0) {
    std::cout << format_summary(report["summary"]) << std::flush;
    if (!cfg.str("output.json").empty()) write_json(cfg.str("output.json"), report, "output.json", 2);
  }
  world->barrier();
  return 0;
}

}  // namespace kformer
