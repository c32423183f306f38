// Writing a universal checkpoint (see checkpoint.hpp).
#include <Kokkos_Core.hpp>
#include <Kokkos_Timer.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "adamw.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checkpoint_format.hpp"
#include "checkpoint/checkpoint_slices.hpp"
#include "checkpoint/checksum.hpp"
#include "platform/device_reduce.hpp"
#include "platform/errors.hpp"
#include "kformer_config.hpp"
#include "kformer_version.hpp"
#include "io/posix_file.hpp"

namespace kformer {
namespace fs = std::filesystem;
namespace {

// Every rank learns whether any failed; the ones that did say why in their own line.
void agree(comm::Communicator& world, const std::string& error, const std::string& dir) {
  const std::int32_t bad = DeviceReduce().allreduce(world, std::int32_t(error.empty() ? 0 : 1), comm::ReduceOp::max);
  if (!bad) return;
  if (!error.empty() && world.rank() != 0) std::cerr << "kformer: rank " << world.rank() << ": " << error << std::endl;
  throw CheckpointError("checkpoint save to " + dir + " failed: " +
                            (world.rank() == 0 && !error.empty() ? error : "see the rank's line above") +
                            "; the previous checkpoint is untouched (free space or fix the path, then resume from it)");
}

template <class F>
std::string attempt(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

// Test hook: KFORMER_TEST_SAVE_FAULT=kill:RANK@ITERATION makes that rank SIGKILL itself halfway
// through writing its slices of the save at that iteration (an interrupted save);
// fail:RANK@ITERATION makes its write fail there instead (a full disk).
void fault_here(int rank, int iteration) {
  const char* e = std::getenv("KFORMER_TEST_SAVE_FAULT");
  if (!e) return;
  char kind[8] = {0};
  int r = -1, it = -1;
  if (std::sscanf(e, "%7[a-z]:%d@%d", kind, &r, &it) != 3 || r != rank || it != iteration) return;
  if (std::string(kind) == "kill") std::raise(SIGKILL);
  throw std::runtime_error("writing slices of iteration " + std::to_string(iteration) +
                           " failed: No space left on device (injected by KFORMER_TEST_SAVE_FAULT)");
}

nlohmann::json metadata(const TrainingPosition& at, const CheckpointContext& c) {
  const RunSettings& cfg = c.settings;
  const OptimizerSettings& s = c.optimizer.settings();
  const kernels::AdamWHyper h;
  return {
      {"format", "kformer universal checkpoint"},
      {"format_version", kCheckpointFormatVersion},
      {"kformer_version", KFORMER_VERSION},
      {"git", KFORMER_GIT_HASH},
      {"iteration", at.iteration},
      {"consumed_samples", at.consumed_samples},
      {"consumed_tokens", at.consumed_tokens},
      {"counters", {{"skipped", at.skipped}, {"nan", at.nan}}},
      {"data", {{"source", cfg.data_source}, {"seed", cfg.train.seed}, {"next_sample", at.consumed_samples},
                {"note", "samples are drawn by global index: iteration i+1 reads [next_sample, next_sample + global_batch)"}}},
      {"lr_schedule", {{"kind", "linear warm-up, then cosine to lr/10 at train.steps"}, {"lr", s.lr}, {"warmup", s.warmup},
                       {"steps", s.steps}, {"lr_at_iteration", learning_rate(s, std::max(1, at.iteration))}}},
      {"optimizer", {{"kind", "AdamW"}, {"beta1", h.beta1}, {"beta2", h.beta2}, {"eps", h.eps},
                     {"weight_decay", s.weight_decay}, {"step", at.iteration},
                     {"decay", "on matrices (weights, embeddings); not on norms and biases"}}},
      {"rng", {{"seed", cfg.train.seed},
               {"note", "counter-based: initial values keyed by (seed, tensor name, element); no generator state"}}},
      {"saved_layout", {{"world", c.world.size()}, {"tp", c.mesh.shape.tp}, {"pp", c.mesh.shape.pp},
                        {"dp", c.mesh.shape.dp}, {"zero", cfg.parallel.zero},
                        {"schedule", name_of(cfg.parallel.schedule)}, {"virtual_stages", cfg.parallel.virtual_stages}}},
      {"deck", cfg.deck.json},
      {"checksum", {{"name", "xsum64"},
                    {"definition", "sum mod 2^64 over elements i (row-major index in the full tensor) of "
                                   "splitmix64_finaliser((i << 32) | float32_bits(x_i))"}}},
  };
}

}  // namespace

void prepare_checkpoint_root(const std::string& root, comm::Communicator& world) {
  std::string error;
  if (world.rank() == 0) error = attempt([&] {
      fs::create_directories(root);
      const std::string probe = root + "/.kformer-write-probe";
      PosixFile f(probe, PosixFile::Mode::create);
      f.write_at("ok", 2, 0);
      f.close();
      fs::remove(probe);
    });
  const std::int32_t bad = DeviceReduce().allreduce(world, std::int32_t(error.empty() ? 0 : 1), comm::ReduceOp::max);
  if (bad) throw ConfigError("checkpoint.save=" + root + " is not writable (" + error + "): give a directory this job can write");
}

namespace {

struct SavePlan {
  std::vector<ParamSpec> specs;
  std::map<std::string, std::size_t> index;  // spec by name
  SafetensorsLayout layouts[2];              // model, optimizer
};
const char* const kFiles[2] = {kModelFile, kOptimizerFile};

// 1. Rank 0: an empty temporary directory (a leftover of an interrupted save removed) holding
//    both files at their full size, headers in place.
void make_files(const std::string& root, const std::string& tmp, const SavePlan& plan) {
  fs::create_directories(root);
  fs::remove_all(tmp);
  fs::create_directory(tmp);
  for (int f = 0; f < 2; ++f) {
    PosixFile file(tmp + "/" + kFiles[f], PosixFile::Mode::create);
    file.write_at(plan.layouts[f].header.data(), plan.layouts[f].header.size(), 0);
    file.resize(plan.layouts[f].file_size);
    file.close();
  }
}

// 2. Every rank: the pieces it owns of the values and both moments, their checksums summed into
//    `sums` (3 per tensor: model, exp_avg, exp_avg_sq). Returns the bytes written.
std::uint64_t write_slices(const std::string& tmp, const SavePlan& plan, const CheckpointContext& c, int iteration,
                           std::vector<std::uint64_t>& sums) {
  const auto runs = checkpoint_slices(c.params, c.optimizer, c.mesh.tp_rank, c.mesh.dp_rank);
  PosixFile files[2] = {{tmp + "/" + kModelFile, PosixFile::Mode::write},
                        {tmp + "/" + kOptimizerFile, PosixFile::Mode::write}};
  std::vector<float> host;
  std::uint64_t written = 0;
  std::size_t done = 0, owned = 0;
  for (const auto& run : runs) owned += run.owned;
  for (const auto& run : runs) {
    if (!run.owned) continue;
    const std::string& name = run.slot->spec.name;
    const std::size_t t = plan.index.at(name);
    for (int part = 0; part < 3; ++part) {
      host.resize(static_cast<std::size_t>(run.length));
      copy_to_host(part_data(run, c.optimizer, part), run.length, host.data());
      const int f = part_file(part);
      const TensorLayout* where = plan.layouts[f].find(part_tensor(part, name));
      for (const auto& p : run.pieces) {
        files[f].write_at(host.data() + p.at, std::uint64_t(p.length) * 4, where->offset + std::uint64_t(p.index) * 4);
        sums[3 * t + part] += xsum64(host.data() + p.at, p.length, std::uint64_t(p.index));
        written += std::uint64_t(p.length) * 4;
      }
    }
    if (++done == (owned + 1) / 2) fault_here(c.world.rank(), iteration);
  }
  for (auto& f : files) f.sync(), f.close();
  return written;
}

// 3. Rank 0: the metadata with the summed checksums, the directory renamed into place, `latest`
//    moved last.
void publish(const std::string& root, const std::string& dir, const std::string& tmp, const SavePlan& plan,
             const std::vector<std::uint64_t>& sums, const TrainingPosition& at, const CheckpointContext& c) {
  nlohmann::json meta = metadata(at, c);
  for (int f = 0; f < 2; ++f) meta["files"][kFiles[f]] = {{"bytes", plan.layouts[f].file_size}};
  for (std::size_t i = 0; i < plan.specs.size(); ++i)
    for (int part = 0; part < 3; ++part)
      meta["files"][kFiles[part_file(part)]]["tensors"][part_tensor(part, plan.specs[i].name)] = {
          {"shape", checkpoint_shape(plan.specs[i])}, {"dtype", "F32"}, {"xsum64", xsum_hex(sums[3 * i + part])}};
  write_file_atomic(tmp + "/" + kMetadataFile, meta.dump(1) + "\n");
  sync_directory(tmp);
  const std::string old = dir + ".old";
  if (fs::exists(dir)) {  // the same iteration saved again: replace it
    fs::remove_all(old);
    fs::rename(dir, old);
  }
  fs::rename(tmp, dir);
  write_file_atomic(root + "/" + kLatestFile, fs::path(dir).filename().string() + "\n");
  fs::remove_all(old);
}

}  // namespace

std::string save_checkpoint(const std::string& root, const TrainingPosition& at, const CheckpointContext& c) {
  Kokkos::Timer timer;
  comm::Communicator& world = c.world;
  const bool root_rank = world.rank() == 0;
  const std::string dir = root + "/" + iteration_dir_name(at.iteration), tmp = dir + ".tmp";
  SavePlan plan;
  plan.specs = model_params(model_shape(c.settings));
  for (std::size_t i = 0; i < plan.specs.size(); ++i) plan.index[plan.specs[i].name] = i;
  const nlohmann::json st_meta = {{"format", "pt"}, {"producer", "kformer"}, {"iteration", std::to_string(at.iteration)}};
  plan.layouts[0] = model_file_layout(plan.specs, st_meta);
  plan.layouts[1] = optimizer_file_layout(plan.specs, st_meta);

  agree(world, root_rank ? attempt([&] { make_files(root, tmp, plan); }) : std::string(), dir);
  std::vector<std::uint64_t> sums(plan.specs.size() * 3, 0);
  double bytes = 0;
  try {
    agree(world, attempt([&] { bytes = double(write_slices(tmp, plan, c, at.iteration, sums)); }), dir);
  } catch (const CheckpointError&) {
    if (root_rank) fs::remove_all(tmp);  // a partial save is of no use, and may be what filled the disk
    throw;
  }
  allreduce_xsums(world, sums);
  agree(world, root_rank ? attempt([&] { publish(root, dir, tmp, plan, sums, at, c); }) : std::string(), dir);

  bytes = DeviceReduce().allreduce(world, bytes, comm::ReduceOp::sum);
  if (root_rank) {
    std::ostringstream line;
    line.precision(3);
    line << "checkpoint: saved iteration " << at.iteration << " to " << dir << " (" << bytes / 1e6 << " MB in "
         << timer.seconds() << " s, " << bytes / 1e6 / std::max(timer.seconds(), 1e-9) << " MB/s)";
    std::cout << line.str() << std::endl;
  }
  return dir;
}

}  // namespace kformer
