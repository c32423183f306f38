// The universal checkpoint on disk. checkpoint.save=ROOT writes, for iteration N,
//   ROOT/iter_000000N/model.safetensors      every parameter, full and unsharded, by stable name
//   ROOT/iter_000000N/optimizer.safetensors  AdamW's exp_avg.NAME and exp_avg_sq.NAME, the same way
//   ROOT/iter_000000N/checkpoint.json        deck, iteration, data position, schedule, checksums
//   ROOT/latest                              the name of the newest complete iteration directory
// Shapes are the model's (the real vocabulary, no TP padding), so any layout reads any checkpoint.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_spec.hpp"
#include "io/safetensors.hpp"

namespace kformer {

constexpr int kCheckpointFormatVersion = 1;
inline const char* const kModelFile = "model.safetensors";
inline const char* const kOptimizerFile = "optimizer.safetensors";
inline const char* const kMetadataFile = "checkpoint.json";
inline const char* const kLatestFile = "latest";

std::string iteration_dir_name(int iteration);  // "iter_0000010"

// The full shape of a parameter in the files: (rows, cols), or (rows) for a vector.
std::vector<std::int64_t> checkpoint_shape(const ParamSpec& spec);

// Tensor names of a file: the parameter names, or exp_avg.NAME / exp_avg_sq.NAME.
std::string moment_name(int moment, const std::string& param);  // moment 1 or 2
// A checkpoint holds three parts of every parameter: 0 its values (model file), 1 and 2 the
// moments (optimizer file). The part's tensor name and its file (0 model, 1 optimizer).
std::string part_tensor(int part, const std::string& param);
inline int part_file(int part) { return part == 0 ? 0 : 1; }

// The two files' layouts for this model (every rank computes the same, no communication).
SafetensorsLayout model_file_layout(const std::vector<ParamSpec>& specs, const nlohmann::json& metadata);
SafetensorsLayout optimizer_file_layout(const std::vector<ParamSpec>& specs, const nlohmann::json& metadata);

// The model keys of a deck that fix the tensors' shapes, for messages on a mismatch.
nlohmann::json model_keys(const nlohmann::json& deck);

}  // namespace kformer
