// The calibrate command (see calibrate_command.hpp).
#include "predict/calibrate_command.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <iostream>

#include "predict/calibrate_comm.hpp"
#include "predict/calibrate_kernels.hpp"
#include "predict/calibrate_rounds.hpp"
#include "predict/calibrate_stage.hpp"
#include "measure/ceiling.hpp"
#include "comm/allocation_registry.hpp"
#include "measure/gemm_choice.hpp"
#include "measure/stable_figure.hpp"
#include "platform/device.hpp"
#include "platform/errors.hpp"
#include "platform/gpu_placement.hpp"
#include "plan/gpu_memory.hpp"
#include "plan/memory.hpp"
#include "platform/node_memory.hpp"
#include "io/posix_file.hpp"
#include "settings/prediction_deck.hpp"
#include "settings/schema.hpp"
#include "settings/world_options.hpp"

namespace kformer::predict {
namespace {

// The tensor-parallel degrees whose shapes are measured: 1, 2 and powers of two up to the job,
// where they divide the heads and the MLP.
std::vector<int> tp_degrees(const ModelSettings& m, int world) {
  std::vector<int> out;
  for (int tp = 1; tp <= std::max(2, world); tp *= 2)
    if (m.n_heads % tp == 0 && m.n_kv_heads % tp == 0 && m.ffn_dim % tp == 0)
      out.push_back(tp);
  return out;
}

}  // namespace

int run_calibrate(const std::vector<std::string>& args, comm::Runtime& runtime, const std::vector<GpuSeat>& gpus) {
  check_kokkos_took_seat(gpus, runtime.world_rank());
  comm::AllocationRegistry::install();  // before any View: comm.strict's checks know them all
  PredictionDeck deck = read_prediction_deck("calibrate", args, true);
  if (deck.cli.exit_now) return deck.cli.exit_code;
  const RunSettings& cfg = deck.settings;
  const bool root = runtime.world_rank() == 0;
  const std::string path = cfg.predict.machine.empty() ? default_profile_path() : cfg.predict.machine;

  // What a rank holds beside its model: the runtime, Kokkos, the communicator's buffers and what
  // a run's start-up leaves in the peak (the GEMM ceiling it measures at the deck's shapes, with
  // the BLAS library's own buffers), all before the kernels below allocate theirs.
  // A run's communicator (the deck's backend, comm.strict, the watchdog), without emulation: the
  // network measured is the real one.
  comm::WorldOptions options = world_options(cfg.comm);
  options.emulate = {};
  const bool one = runtime.world_size() == 1;
  std::unique_ptr<comm::Communicator> world;
  try {
    world = comm::make_world(one ? "self" : cfg.comm.backend, runtime, options);
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());  // the same verdict on every rank: report it once
  }
  if (root) {
    const std::string& why = cfg.comm.auto_reason;
    std::cout << "kformer calibrate: " << runtime.world_size() << " rank(s), comm " << world->backend() << " ("
              << (one ? "one rank: no network to measure"
                      : "comm.backend = " + (why.empty() ? cfg.comm.backend
                                                         : "auto -> " + cfg.comm.backend + " (" + why + ")"))
              << "), Kokkos " << Kokkos::DefaultExecutionSpace::name() << "\n";
    if (!gpus.empty()) std::cout << "gpu: " << describe_seat(gpus.front()) << "\n";
    std::cout << std::flush;
  }
  world->barrier();
  const BlockDims dims = block_dims(model_shape(cfg), cfg.train.micro_batch, cfg.train.seq_len);
  const GemmCeiling ceiling = measure_gemm_ceiling(dims, cfg.train.precision);
  // kernels.gemm=auto: the kernels are calibrated on the GEMM a run would take here, the faster of
  // that timing (gemm_choice.hpp; this rank's own figures: the GEMMs involve no other rank).
  const kernels::GemmImpl gemm =
      choose_gemm(cfg.kernels.gemm, ceiling.native_tflops, ceiling.vendor_tflops, ceiling.precision).impl;
  const double baseline = measured_peak_bytes();
  MachineProfile p;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    try {
      p = load_profile(path);  // keep its shapes; ours are added or replace theirs
    } catch (const std::exception&) {
      p = MachineProfile{};
    }
  }
  char host[256] = "this-machine";
  gethostname(host, sizeof(host) - 1);
  p.name = std::string(host) + " (" + Kokkos::DefaultExecutionSpace::name() + ", " +
           std::to_string(Exec().concurrency()) + " thread(s) per rank, " + std::to_string(runtime.world_size()) +
           " rank(s), calibrated)";
  p.process_baseline_gb = baseline / 1e9;
  p.kformer_build = kernels::runs_on_host<Exec> ? kernels::CodePath::this_build : kernels::CodePath::cuda;
  // Per device: the GPU's own memory where the ranks run on GPUs (the model lives there; an H100
  // node's 128 GB of host memory is not what a rank can fill), else the node's share.
  const double gpu_bytes = gpu_memory_bytes();
  p.memory_gb = (gpu_bytes > 0 ? gpu_bytes : probe_node_memory(runtime.ranks_on_node()).per_rank()) / 1e9;
  // In rounds, each the kernels (calibrate_rounds.hpp) and then the whole model over them (a ratio of
  // two figures of one round), until three rounds in a row agree on that ratio within
  // calibrate.agreement (each the slowest rank's, so every rank repeats alike); each kernel figure is
  // the median of its rounds. The wake-ups within 5 times the bound or 50 us.
  const Agreement bound{cfg.calibrate.agreement, 0, 3, cfg.calibrate.max_repeats};
  const Agreement wakeups{5 * cfg.calibrate.agreement, 50, 3, cfg.calibrate.max_repeats};
  const std::vector<int> tps = tp_degrees(cfg.model, runtime.world_size());
  std::vector<MachineProfile> rounds;
  const StableFigure scale = repeat_until_stable(
      [&] {
        rounds.push_back(p);
        calibrate_kernels(cfg, gemm, tps, rounds.back());
        return measure_compute_scale(cfg, gemm, rounds.back(), world.get());
      },
      bound);
  RoundsSpread kernel_spread;
  p = median_of_rounds(rounds, &kernel_spread);
  fit_kernel_curves(p);
  p.compute_scale = scale.value;

  CommStability comm_figures;
  if (runtime.world_size() > 1) {
    comm_figures = calibrate_comm(*world, p, wakeups);
  } else if (p.intra_node.collectives.empty()) {
    p.intra_node.fallback = {10, 40, 0};  // one rank measured no network: a placeholder (10 us, 40 Gbit/s)
    p.inter_node = p.intra_node;
  }
  // A figure whose repeats never agreed is a busy moment, not the machine: no profile is written.
  const std::vector<std::pair<const char*, const StableFigure*>> checked = {
      {"the whole model's scale over its kernels", &scale},
      {"the wake-up of a waiting rank (us)", &comm_figures.wakeup},
      {"the wake-up of a joint entry (us)", &comm_figures.sync_wakeup}};
  for (const auto& [what, f] : checked)
    if (f->repeats > 0 && !f->agreed)
      throw ConfigError("calibrate: the repeats of " + std::string(what) + " disagree, " + f->describe() +
                        ": the machine was busy while it measured, so " + path +
                        " was not written; run kformer calibrate again when the node is idle (or allow more: "
                        "calibrate.agreement=" + format_value(cfg.calibrate.agreement) + " now)");
  if (root) {
    const std::string header =
        "# Machine profile written by `kformer calibrate " + deck.cli.deck +
        "` (miniapp/predict/calibrate_*.cpp):\n# kernel times at the deck's shapes, GB/s of the memory-bound families, "
        "the communicator's alpha-beta fits\n# per collective and group size (intra_node; one node measured, so "
        "inter_node repeats it).\n";
    const std::size_t slash = path.rfind('/');
    if (slash != std::string::npos) ::mkdir(path.substr(0, slash).c_str(), 0755);
    write_file_atomic(path, profile_yaml(p, header));
    std::cout << "kformer calibrate: wrote " << path << " (" << p.fp32.gemm_points.size() + p.bf16.gemm_points.size()
              << " GEMM shapes, " << p.fp32.attention_points.size() + p.bf16.attention_points.size()
              << " attention shapes; FMA peak " << p.fma_peak_tflops << " TFLOP/s, best GEMM " << p.fp32.best_gemm_tflops()
              << " (bf16 " << p.bf16.best_gemm_tflops() << ") TFLOP/s, copy "
              << p.copy_gbps << " GB/s, launch " << p.launch_us << " us; kernels " << kernel_spread.describe()
              << "; whole model " << scale.describe() << "x its kernels";
    if (runtime.world_size() > 1)
      std::cout << "; allreduce on " << runtime.world_size() << " ranks: " << p.intra_node.fallback.latency_us
                << " us + bytes at " << p.intra_node.fallback.bandwidth_gbps << " Gbit/s; wake-up "
                << comm_figures.wakeup.describe() << " us, joint entry " << comm_figures.sync_wakeup.describe() << " us";
    std::cout << ")" << std::endl;
  }
  world->barrier();
  return 0;
}

}  // namespace kformer::predict
