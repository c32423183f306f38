// Universal checkpoints: save at one layout (tp, pp, dp, zero, schedule), resume at any other.
// Each rank writes and reads only its own slices of the full tensors (checkpoint_slices.hpp) at
// computed offsets in shared files (checkpoint_format.hpp); nothing is gathered on one rank.
// A save goes to a temporary directory, synced, then renamed; `latest` moves last, so a save
// interrupted at any point leaves the previous checkpoint as it was.
#pragma once

#include <cstdint>
#include <string>

#include "comm/mesh.hpp"
#include "model/optimizer.hpp"
#include "model/param_store.hpp"
#include "settings/run_settings.hpp"

namespace kformer {

// Where a run stands after an iteration: what a resume continues from.
struct TrainingPosition {
  int iteration = 0;                  // last completed iteration
  std::int64_t consumed_samples = 0;  // the next iteration starts at this global sample
  std::int64_t consumed_tokens = 0;
  std::int64_t skipped = 0, nan = 0;  // the log line's counters
};

struct CheckpointContext {
  const RunSettings& settings;
  const comm::Mesh& mesh;
  comm::Communicator& world;
  ParamStore& params;
  Optimizer& optimizer;
};

// Writes ROOT/iter_NNNNNNN and points ROOT/latest at it; returns that directory. Any rank's
// failure throws the same CheckpointError (exit 5) on every rank, the previous checkpoint intact.
std::string save_checkpoint(const std::string& root, const TrainingPosition& at, const CheckpointContext& c);

// Before training: rank 0 makes ROOT and writes a probe file in it, so that an unwritable
// checkpoint.save fails now (ConfigError on every rank) rather than after hours of training.
void prepare_checkpoint_root(const std::string& root, comm::Communicator& world);

// Reads the checkpoint at PATH (an iteration directory, or a save root with a `latest` file) into
// this rank's parameters and moments, checking shapes against the deck and every tensor's
// checksum. Throws ConfigError naming the file, the tensor and the fix.
TrainingPosition load_checkpoint(const std::string& path, const CheckpointContext& c);

// The iteration directory PATH names (itself, or what ROOT/latest says). Throws ConfigError.
std::string resolve_checkpoint_dir(const std::string& path);

}  // namespace kformer
