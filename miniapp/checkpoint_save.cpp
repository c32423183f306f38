// Writing a universal checkpoint (see checkpoint.hpp).
#include <Kokkos_Core.hpp>
#include <Kokkos_Timer.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "adamw.hpp"
#include "checkpoint.hpp"
#include "checkpoint_format.hpp"
#include "checkpoint_slices.hpp"
#include "checksum.hpp"
#include "errors.hpp"
#include "kformer_config.hpp"
#include "posix_file.hpp"

namespace kformer {
namespace fs = std::filesystem;
namespace {

// Every rank learns whether any failed; the ones that did say why in their own line.
void agree(comm::Communicator& world, const std::string& error, const std::string& dir) {
  int bad = error.empty() ? 0 : 1;
  world.allreduce(&bad, &bad, 1, comm::DType::i32, comm::ReduceOp::max);
  if (!bad) return;
  if (!error.empty() && world.rank() != 0) std::cerr << "kformer: rank " << world.rank() << ": " << error << std::endl;
  throw CollectiveError("checkpoint save to " + dir + " failed: " +
                            (world.rank() == 0 && !error.empty() ? error : "see the rank's line above") +
                            "; the previous checkpoint is untouched (free space or fix the path, then resume from it)",
                        4);
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

void to_host(const float* device, std::int64_t n, std::vector<float>& out) {
  out.resize(static_cast<std::size_t>(n));
  Kokkos::deep_copy(Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(out.data(), n),
                    as_vector(const_cast<float*>(device), n));
}

// Test hook: KFORMER_TEST_KILL_IN_SAVE=RANK@ITERATION makes that rank SIGKILL itself halfway
// through writing its slices of the model file at that iteration (an interrupted save).
bool kill_here(int rank, int iteration) {
  const char* e = std::getenv("KFORMER_TEST_KILL_IN_SAVE");
  if (!e) return false;
  int r = -1, it = -1;
  return std::sscanf(e, "%d@%d", &r, &it) == 2 && r == rank && it == iteration;
}

nlohmann::json metadata(const TrainingPosition& at, const CheckpointContext& c) {
  const Config& cfg = c.cfg;
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
      {"data", {{"source", cfg.str("data.source")}, {"seed", cfg.i64("train.seed")}, {"next_sample", at.consumed_samples},
                {"note", "samples are drawn by global index: iteration i+1 reads [next_sample, next_sample + global_batch)"}}},
      {"lr_schedule", {{"kind", "linear warm-up, then cosine to lr/10 at train.steps"}, {"lr", s.lr}, {"warmup", s.warmup},
                       {"steps", s.steps}, {"lr_at_iteration", learning_rate(s, std::max(1, at.iteration))}}},
      {"optimizer", {{"kind", "AdamW"}, {"beta1", h.beta1}, {"beta2", h.beta2}, {"eps", h.eps},
                     {"weight_decay", s.weight_decay}, {"step", at.iteration},
                     {"decay", "on matrices (weights, embeddings); not on norms and biases"}}},
      {"rng", {{"seed", cfg.i64("train.seed")},
               {"note", "counter-based: initial values keyed by (seed, tensor name, element); no generator state"}}},
      {"saved_layout", {{"world", c.world.size()}, {"tp", c.mesh.shape.tp}, {"pp", c.mesh.shape.pp},
                        {"dp", c.mesh.shape.dp}, {"zero", cfg.i32("parallel.zero")},
                        {"schedule", cfg.str("parallel.schedule")}, {"virtual_stages", cfg.i32("parallel.virtual_stages")}}},
      {"deck", cfg.to_json()},
      {"checksum", {{"name", "xsum64"},
                    {"definition", "sum mod 2^64 over elements i (row-major index in the full tensor) of "
                                   "splitmix64_finaliser((i << 32) | float32_bits(x_i))"}}},
  };
}

}  // namespace

std::string save_checkpoint(const std::string& root, const TrainingPosition& at, const CheckpointContext& c) {
  Kokkos::Timer timer;
  comm::Communicator& world = c.world;
  const int me = world.rank();
  const std::string name = iteration_dir_name(at.iteration);
  const std::string dir = root + "/" + name, tmp = dir + ".tmp";
  const std::vector<ParamSpec> specs = model_params(model_shape(c.cfg));
  const nlohmann::json st_meta = {{"format", "pt"}, {"producer", "kformer"}, {"iteration", std::to_string(at.iteration)}};
  const SafetensorsLayout layouts[2] = {model_file_layout(specs, st_meta), optimizer_file_layout(specs, st_meta)};
  const char* files[2] = {kModelFile, kOptimizerFile};

  // 1. Rank 0 makes an empty temporary directory (a leftover of an interrupted save is removed)
  //    and both files at their full size, headers in place.
  agree(world, me != 0 ? std::string() : attempt([&] {
    fs::create_directories(root);
    fs::remove_all(tmp);
    fs::create_directory(tmp);
    for (int f = 0; f < 2; ++f) {
      PosixFile file(tmp + "/" + files[f], PosixFile::Mode::create);
      file.write_at(layouts[f].header.data(), layouts[f].header.size(), 0);
      file.resize(layouts[f].file_size);
      file.close();
    }
  }), dir);

  // 2. Every rank writes the slices it owns, summing their checksums as it goes.
  const auto runs = checkpoint_slices(c.params, c.optimizer, c.mesh.tp_rank, c.mesh.dp_rank);
  std::vector<std::uint64_t> sums(specs.size() * 3, 0);  // model, exp_avg, exp_avg_sq
  std::map<std::string, std::size_t> spec_index;
  for (std::size_t i = 0; i < specs.size(); ++i) spec_index[specs[i].name] = i;
  std::uint64_t written = 0;
  agree(world, attempt([&] {
    PosixFile model(tmp + "/" + kModelFile, PosixFile::Mode::write);
    PosixFile moments(tmp + "/" + kOptimizerFile, PosixFile::Mode::write);
    std::vector<float> host;
    std::size_t done = 0, owned = 0;
    for (const auto& run : runs) owned += run.owned;
    for (const auto& run : runs) {
      if (!run.owned) continue;
      const std::size_t t = spec_index.at(run.slot->spec.name);
      for (int which = 0; which < 3; ++which) {
        const float* src = which == 0 ? run.values
                           : which == 1 ? c.optimizer.first_moment().data() + run.state_offset
                                        : c.optimizer.second_moment().data() + run.state_offset;
        to_host(src, run.length, host);
        const std::string tensor = which == 0 ? run.slot->spec.name : moment_name(which, run.slot->spec.name);
        const TensorLayout* where = layouts[which == 0 ? 0 : 1].find(tensor);
        for (const auto& p : run.pieces) {
          (which == 0 ? model : moments)
              .write_at(host.data() + p.at, std::uint64_t(p.length) * 4, where->offset + std::uint64_t(p.index) * 4);
          sums[3 * t + which] += xsum64(host.data() + p.at, p.length, std::uint64_t(p.index));
          written += std::uint64_t(p.length) * 4;
        }
      }
      if (++done == (owned + 1) / 2 && kill_here(me, at.iteration)) std::raise(SIGKILL);
    }
    model.sync();
    moments.sync();
    model.close();
    moments.close();
  }), dir);

  // 3. Checksums summed over the ranks; rank 0 writes the metadata, renames the directory into
  //    place and moves `latest` last.
  allreduce_xsums(world, sums);
  agree(world, me != 0 ? std::string() : attempt([&] {
    nlohmann::json meta = metadata(at, c);
    for (int f = 0; f < 2; ++f) {
      nlohmann::json tensors = nlohmann::json::object();
      for (const auto& t : layouts[f].tensors) {
        std::size_t i = 0;
        int which = 0;
        if (f == 0) {
          i = spec_index.at(t.name);
        } else {
          which = t.name.rfind("exp_avg_sq.", 0) == 0 ? 2 : 1;
          i = spec_index.at(t.name.substr(which == 1 ? 8 : 11));
        }
        tensors[t.name] = {{"shape", t.shape}, {"dtype", t.dtype}, {"xsum64", xsum_hex(sums[3 * i + which])}};
      }
      meta["files"][files[f]] = {{"bytes", layouts[f].file_size}, {"tensors", tensors}};
    }
    write_file_atomic(tmp + "/" + kMetadataFile, meta.dump(1) + "\n");
    sync_directory(tmp);
    const std::string old = dir + ".old";
    if (fs::exists(dir)) {
      fs::remove_all(old);
      fs::rename(dir, old);
    }
    fs::rename(tmp, dir);
    write_file_atomic(root + "/" + kLatestFile, name + "\n");
    fs::remove_all(old);
  }), dir);

  std::uint64_t total = written;
  double bytes = double(total);
  world.allreduce(&bytes, &bytes, 1, comm::DType::f64, comm::ReduceOp::sum);
  if (me == 0) {
    std::ostringstream line;
    line.precision(3);
    line << "checkpoint: saved iteration " << at.iteration << " to " << dir << " (" << bytes / 1e6 << " MB in "
         << timer.seconds() << " s, " << bytes / 1e6 / std::max(timer.seconds(), 1e-9) << " MB/s)";
    std::cout << line.str() << std::endl;
  }
  return dir;
}

}  // namespace kformer
