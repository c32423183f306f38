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

// Writes atomically (posix_file.hpp: PATH.tmp, synced, renamed). Throws std::runtime_error naming the path.
void write_safetensors(const std::string& path, const std::map<std::string, TensorEntry>& tensors,
                       const nlohmann::json& metadata = nlohmann::json::object());

TensorEntry f32_tensor(const std::vector<float>& values, std::vector<std::int64_t> shape);

// A file's layout without its data: tensors in file order, each at a byte offset from the start
// of the file. Lets several ranks write (or read) their own slices of one file.
struct TensorLayout {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0, bytes = 0;  // from the start of the file
};
struct SafetensorsLayout {
  std::string header;                 // the 8 length bytes and the padded JSON
  std::vector<TensorLayout> tensors;  // in file order
  std::uint64_t file_size = 0;
  const TensorLayout* find(const std::string& name) const;
};

// Lays `tensors` (name, dtype "F32"/"I32", shape; data not needed) out back to back in this order.
SafetensorsLayout plan_safetensors(const std::vector<TensorLayout>& tensors, const nlohmann::json& metadata);

// Reads and checks a file's header: every tensor's range inside the file, the file as long as
// the header says. Throws std::runtime_error with one line naming the file and the problem.
SafetensorsLayout read_safetensors_layout(const std::string& path);

}  // namespace kformer
