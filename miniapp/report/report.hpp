// The JSON report (output.json, written by rank 0) and the run's closing summary: DESIGN.md's
// fields (config, mesh, iterations, summary) plus the platform, the ceilings (best GEMM, FMA peak)
// and MFU against each, the FLOP count beside its closed form, and memory estimated and measured.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "measure/ceiling.hpp"
#include "comm/mesh.hpp"
#include "measure/attention_choice.hpp"
#include "measure/gemm_choice.hpp"
#include "io/json_file.hpp"
#include "plan/run_plan.hpp"
#include "train/trainer.hpp"

namespace kformer {

nlohmann::json mesh_json(const comm::Mesh& m, int world);
nlohmann::json platform_json(int world);
// output.kernel_times' figures: per timed step, by kernel family and by entry point (longest first).
nlohmann::json kernel_times_json(const KernelTimes& k);

// Collective over `world` (the peak memory is the largest over ranks); meaningful on rank 0.
nlohmann::json build_report(const RunPlan& plan, const comm::Mesh& mesh, comm::Communicator& world,
                            const Trainer& trainer, const GemmCeiling& ceiling, const GemmChoice& gemm,
                            const AttentionChoice& attention);

}  // namespace kformer
