// The run of one deck: resolve the configuration, build the mesh, report. main() only
// initialises the runtimes and hands over to run_app().
#pragma once

#include <vector>

#include "settings/cli.hpp"
#include "comm/runtime.hpp"
#include "platform/gpu_choice.hpp"
#include "plan/run_plan.hpp"

namespace kformer {

// The deck, its overrides and every check that needs neither Kokkos nor communication (the data
// source opened included): called before Kokkos starts, so bad input gets only its own line.
// `ranks_on_node` ranks share this node's memory (the memory check without memory.limit_gb).
RunPlan load_plan(const CliArgs& args, int world_size, int ranks_on_node);

// `gpus`: every rank's seat from place_gpus (empty in host builds), for the start-up lines.
int run_app(const CliArgs& args, const RunPlan& plan, comm::Runtime& runtime, const std::vector<GpuSeat>& gpus = {});

}  // namespace kformer
