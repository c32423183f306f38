// The safetensors format (see safetensors.hpp).
#include "safetensors.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace kformer {

TensorEntry f32_tensor(const std::vector<float>& values, std::vector<std::int64_t> shape) {
  TensorEntry t{"F32", std::move(shape), std::vector<char>(values.size() * sizeof(float))};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

void write_safetensors(const std::string& path, const std::map<std::string, TensorEntry>& tensors,
                       const nlohmann::json& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  if (!metadata.empty()) {
    nlohmann::json meta = nlohmann::json::object();  // safetensors metadata values are strings
    for (auto it = metadata.begin(); it != metadata.end(); ++it)
      meta[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
    header["__metadata__"] = meta;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw std::runtime_error("cannot write " + tmp + ": give a path in a writable directory");
    const std::uint64_t n = text.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, t] : tensors) out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
    out.flush();
    if (!out) throw std::runtime_error("writing " + tmp + " failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp + " to " + path);
}

}  // namespace kformer
