// Reading a universal checkpoint at any layout (see checkpoint.hpp).
#include <Kokkos_Core.hpp>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checkpoint_format.hpp"
#include "checkpoint/checkpoint_slices.hpp"
#include "checkpoint/checksum.hpp"
#include "platform/errors.hpp"
#include "io/posix_file.hpp"

namespace kformer {
namespace fs = std::filesystem;
namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  return os.str() + ']';
}

// "model.d_model is 64 in the checkpoint, 128 in the deck; ..." or a generic hint.
std::string model_difference(const nlohmann::json& saved_deck, const RunSettings& s) {
  const nlohmann::json saved = model_keys(saved_deck), now = model_keys(s.deck.json);
  std::string out;
  for (auto it = saved.begin(); it != saved.end(); ++it)
    if (now.contains(it.key()) && now[it.key()] != *it)
      out += (out.empty() ? "" : ", ") + it.key() + " is " + it->dump() + " in the checkpoint, " +
             now[it.key()].dump() + " in the deck";
  return out.empty() ? "load a checkpoint of this model" : out + ": set the deck's model keys to the checkpoint's";
}

void check_tensor(const SafetensorsLayout& file, const std::string& path, const std::string& name,
                  const std::vector<std::int64_t>& shape, const std::string& hint) {
  const TensorLayout* t = file.find(name);
  if (!t) throw ConfigError("checkpoint " + path + " has no tensor '" + name + "' " + shape_text(shape) + ": " + hint);
  if (t->dtype != "F32" || t->shape != shape)
    throw ConfigError("checkpoint tensor '" + name + "' in " + path + " is " + t->dtype + " " + shape_text(t->shape) +
                      ", the deck's model needs F32 " + shape_text(shape) + ": " + hint);
}

}  // namespace

std::string resolve_checkpoint_dir(const std::string& path) {
  if (fs::exists(path + "/" + kMetadataFile)) return path;
  const std::string latest = path + "/" + kLatestFile;
  if (fs::exists(latest)) {
    std::string name = read_text_file(latest);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    const std::string dir = path + "/" + name;
    if (!fs::exists(dir + "/" + kMetadataFile))
      throw ConfigError("checkpoint.load=" + path + ": 'latest' names " + name + ", which has no " + kMetadataFile +
                        ": give an iteration directory, e.g. checkpoint.load=" + path + "/iter_NNNNNNN");
    return dir;
  }
  if (!fs::exists(path))
    throw ConfigError("checkpoint.load=" + path + ": no such directory: give a directory written by checkpoint.save");
  throw ConfigError("checkpoint.load=" + path + ": neither " + kMetadataFile + " nor a '" + kLatestFile +
                    "' file there: give a directory written by checkpoint.save (the root or one iter_NNNNNNN in it)");
}

TrainingPosition load_checkpoint(const std::string& path, const CheckpointContext& c) {
  const std::string dir = resolve_checkpoint_dir(path);
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(read_text_file(dir + "/" + kMetadataFile));
  } catch (const std::exception& e) {
    throw ConfigError("checkpoint " + dir + "/" + kMetadataFile + " is corrupted (" + std::string(e.what()) +
                      "): load an earlier checkpoint");
  }
  if (meta.value("format_version", 0) != kCheckpointFormatVersion)
    throw ConfigError("checkpoint " + dir + " has format version " + meta.value("format_version", nlohmann::json()).dump() +
                      ", this kformer reads version " + std::to_string(kCheckpointFormatVersion) +
                      ": use the kformer that wrote it");

  // Both files' headers: present, whole, and holding this model's tensors at their full shapes.
  const std::vector<ParamSpec> specs = model_params(model_shape(c.settings));
  const std::string hint = model_difference(meta.value("deck", nlohmann::json::object()), c.settings);
  const std::string paths[2] = {dir + "/" + kModelFile, dir + "/" + kOptimizerFile};
  SafetensorsLayout layouts[2];
  for (int f = 0; f < 2; ++f) {
    try {
      layouts[f] = read_safetensors_layout(paths[f]);
    } catch (const std::exception& e) {
      throw ConfigError(std::string("checkpoint ") + e.what() + ": load an earlier checkpoint");
    }
  }
  std::map<std::string, std::size_t> spec_index;
  for (std::size_t i = 0; i < specs.size(); ++i) spec_index[specs[i].name] = i;
  for (const auto& s : specs)
    for (int part = 0; part < 3; ++part) {
      const int f = part_file(part);
      check_tensor(layouts[f], paths[f], part_tensor(part, s.name), checkpoint_shape(s), hint);
    }
  for (const auto& t : layouts[0].tensors)
    if (!spec_index.count(t.name))
      throw ConfigError("checkpoint " + paths[0] + " holds '" + t.name + "', which the deck's model lacks: " + hint);

  // Every rank reads what it holds; the owned pieces' checksums are summed over the world.
  std::vector<std::uint64_t> sums(specs.size() * 3, 0);
  {
    const PosixFile files[2] = {{paths[0], PosixFile::Mode::read}, {paths[1], PosixFile::Mode::read}};
    std::vector<float> host;
    for (const auto& run : checkpoint_slices(c.params, c.optimizer, c.mesh.tp_rank, c.mesh.dp_rank)) {
      const std::size_t t = spec_index.at(run.slot->spec.name);
      for (int part = 0; part < 3; ++part) {
        const int f = part_file(part);
        const TensorLayout* where = layouts[f].find(part_tensor(part, run.slot->spec.name));
        host.assign(static_cast<std::size_t>(run.length), 0.0f);  // padding rows stay zero
        for (const auto& p : run.pieces) {
          files[f].read_at(host.data() + p.at, std::uint64_t(p.length) * 4, where->offset + std::uint64_t(p.index) * 4);
          if (run.owned) sums[3 * t + part] += xsum64(host.data() + p.at, p.length, std::uint64_t(p.index));
        }
        copy_to_device(host.data(), run.length, part_data(run, c.optimizer, part));
      }
    }
  }
  allreduce_xsums(c.world, sums);
  for (const auto& s : specs)
    for (int part = 0; part < 3; ++part) {
      const std::string tensor = part_tensor(part, s.name);
      const int f = part_file(part);
      const std::string want =
          meta["files"][f == 0 ? kModelFile : kOptimizerFile]["tensors"][tensor].value("xsum64", std::string("none"));
      const std::string got = xsum_hex(sums[3 * spec_index.at(s.name) + part]);
      if (got != want)
        throw ConfigError("checkpoint tensor '" + tensor + "' in " + paths[f] + " fails its checksum (xsum64 " + got +
                          ", " + kMetadataFile + " says " + want + "): the file is corrupted; load an earlier checkpoint");
    }
  c.params.allgather_values();  // ZeRO-1/2: each rank read its shard; every rank needs the whole
  c.params.drop_gathered();

  TrainingPosition at;
  at.iteration = meta.value("iteration", 0);
  at.consumed_samples = meta.value("consumed_samples", std::int64_t(0));
  at.consumed_tokens = meta.value("consumed_tokens", std::int64_t(0));
  at.skipped = meta["counters"].value("skipped", std::int64_t(0));
  at.nan = meta["counters"].value("nan", std::int64_t(0));
  return at;
}

}  // namespace kformer
