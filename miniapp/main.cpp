// kformer's driver: parse the command line, initialise MPI and Kokkos, run, report errors once.
#include <Kokkos_Core.hpp>

#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "app.hpp"
#include "settings/cli.hpp"
#include "comm/runtime.hpp"
#include "platform/errors.hpp"
#include "platform/gpu_placement.hpp"
#include "predict/calibrate_command.hpp"
#include "predict/predict_command.hpp"

namespace {

constexpr int kGoOn = -1;  // run_alone's body: nothing to exit with, the run goes on

// `body` in a process that has not started MPI: an error is one line on stderr and an exit code.
template <class Body>
int run_alone(Body&& body, const char* who) {
  try {
    return body();
  } catch (const kformer::CollectiveError& e) {
    std::cerr << "kformer: error: " << e.what() << std::endl;
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "kformer: error" << who << ": " << e.what() << std::endl;
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // `kformer predict`: one process, no MPI (predict_command.hpp). Kokkos is started, quietly,
  // because the described step builds the model's objects on the execution space; nothing is
  // launched or allocated there. (A CUDA build therefore needs a GPU to predict: a host build
  // predicts the same, from the profile.)
  if (argc > 1 && std::string(argv[1]) == "predict")
    return run_alone(
        [&] {
          kformer::KokkosArguments kokkos_args(1, argv, {"--kokkos-disable-warnings"});
          Kokkos::ScopeGuard kokkos(kokkos_args.argc(), kokkos_args.argv());
          return kformer::predict::run_predict({argv + 2, argv + argc});
        },
        "");
  // A plain `kformer ...` (no launcher) is one rank: the command line, --version/--keys/--help and
  // the deck with its checks need no MPI, so they come first and bad input exits before MPI_Init.
  // Under a launcher every rank starts MPI first and rank 0 reports a verdict once (below).
  std::optional<kformer::CliArgs> early_args;
  std::optional<kformer::RunPlan> early_plan;
  const bool calibrate = argc > 1 && std::string(argv[1]) == "calibrate";
  if (!calibrate && !kformer::comm::started_by_launcher()) {
    const int rc = run_alone(
        [&] {
          early_args = kformer::parse_cli(argc, argv);
          if (early_args->exit_now) return early_args->exit_code;
          if (early_args->version || early_args->keys) {
            std::cout << (early_args->version ? kformer::version_text() : kformer::keys_text());
            return 0;
          }
          early_plan = kformer::load_plan(*early_args, 1);
          return kGoOn;
        },
        " on rank 0");
    if (rc != kGoOn) return rc;
  }
  kformer::comm::Runtime runtime(argc, argv);
  const bool root = runtime.world_rank() == 0;
  int rc = 0;
  try {
    if (calibrate) {  // calibrate_command.hpp
      // Each rank on its own GPU, as a run places them (host builds: none).
      const std::vector<kformer::GpuSeat> gpus = kformer::place_gpus({argv, argv + argc}, runtime);
      kformer::KokkosArguments kokkos_args(argc, argv, kformer::kokkos_device_arguments(gpus, runtime.world_rank()));
      Kokkos::ScopeGuard kokkos(kokkos_args.argc(), kokkos_args.argv());
      std::vector<std::string> rest;
      for (int i = 2; i < argc; ++i)
        if (std::string(argv[i]).rfind("--kokkos", 0) != 0) rest.push_back(argv[i]);
      return kformer::predict::run_calibrate(rest, runtime, gpus);
    }
    const kformer::CliArgs args = early_args ? *early_args : kformer::parse_cli(argc, argv);
    if (args.exit_now) return args.exit_code;
    if (args.version || args.keys) {
      if (root) std::cout << (args.version ? kformer::version_text() : kformer::keys_text());
      return 0;
    }
    // The early deck was resolved for one rank; a launch the environment did not reveal resolves
    // it again for what MPI says.
    const bool early_fits = early_plan && runtime.world_size() == 1;
    const kformer::RunPlan plan =
        early_fits ? *early_plan : kformer::load_plan(args, runtime.world_size());
    // CUDA builds: each rank's own GPU, told to Kokkos before it starts (host builds: none).
    const std::vector<kformer::GpuSeat> gpus = kformer::place_gpus({argv, argv + argc}, runtime);
    kformer::KokkosArguments kokkos_args(argc, argv, kformer::kokkos_device_arguments(gpus, runtime.world_rank()));
    Kokkos::ScopeGuard kokkos(kokkos_args.argc(), kokkos_args.argv());
    rc = kformer::run_app(args, plan, runtime, gpus);
  } catch (const kformer::CollectiveError& e) {
    // Every rank reached the same verdict: one line, from rank 0.
    if (root) std::cerr << "kformer: error: " << e.what() << std::endl;
    rc = e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "kformer: error on rank " << runtime.world_rank() << ": " << e.what() << std::endl;
    runtime.abort(1);
  }
  return rc;
}
