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
// source opened included): called before Kokkos starts, so bad input gets only its own line. The
// plan comes without its memory estimate (plan_without_memory), which takes Kokkos.
RunPlan load_plan(const CliArgs& args, int world_size);

// `layout`: load_plan's. Estimates the memory and checks it (memory.limit_gb, else this node's
// memory shared by its ranks), then runs. `gpus`: every rank's seat from place_gpus (empty in host
// builds), for the start-up lines.
int run_app(const CliArgs& args, const RunPlan& layout, comm::Runtime& runtime, const std::vector<GpuSeat>& gpus = {});

}  // namespace kformer
