// kformer's driver: initialise MPI and Kokkos, parse the command line, run, report errors once.
#include <Kokkos_Core.hpp>

#include <exception>
#include <iostream>

#include "app.hpp"
#include "cli.hpp"
#include "comm/runtime.hpp"
#include "errors.hpp"

int main(int argc, char** argv) {
  kformer::comm::Runtime runtime(argc, argv);
  const bool root = runtime.world_rank() == 0;
  int rc = 0;
  try {
    const kformer::CliArgs args = kformer::parse_cli(argc, argv);
    if (args.exit_now) return args.exit_code;
    if (args.version || args.keys) {
      if (root) std::cout << (args.version ? kformer::version_text() : kformer::keys_text());
      return 0;
    }
    const kformer::Config cfg = kformer::load_config(args, runtime.world_size(), runtime.ranks_on_node());
    Kokkos::ScopeGuard kokkos(argc, argv);
    rc = kformer::run_app(args, cfg, runtime);
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
