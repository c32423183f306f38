// The safetensors format (what PyTorch and the Hugging Face tools read): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, then the raw
// data. Used for the reference export and the universal checkpoints.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kformer {

struct TensorEntry {
  std::string dtype;                // "F32", "I32"
  std::vector<std::int64_t> shape;
  std::vector<char> bytes;
};

// Writes atomically: to PATH.tmp, flushed, then renamed. Throws std::runtime_error naming the path.
void write_safetensors(const std::string& path, const std::map<std::string, TensorEntry>& tensors,
                       const nlohmann::json& metadata = nlohmann::json::object());

TensorEntry f32_tensor(const std::vector<float>& values, std::vector<std::int64_t> shape);

}  // namespace kformer
