// The safetensors format (see safetensors.hpp).
#include "io/safetensors.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "io/posix_file.hpp"

namespace kformer {
namespace {

std::uint64_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F16" || dtype == "BF16") return 2;
  throw std::runtime_error("unsupported safetensors dtype " + dtype);
}

std::uint64_t elements(const std::vector<std::int64_t>& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

}  // namespace

const TensorLayout* SafetensorsLayout::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsLayout plan_safetensors(const std::vector<TensorLayout>& tensors, const nlohmann::json& metadata) {
  SafetensorsLayout out;
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    const std::uint64_t n = elements(t.shape) * dtype_bytes(t.dtype);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    out.tensors.push_back({t.name, t.dtype, t.shape, offset, n});
    offset += n;
  }
  if (!metadata.empty()) {
    nlohmann::json meta = nlohmann::json::object();  // safetensors metadata values are strings
    for (auto it = metadata.begin(); it != metadata.end(); ++it)
      meta[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
    header["__metadata__"] = meta;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const std::uint64_t len = text.size();
  out.header.resize(8);
  for (int i = 0; i < 8; ++i) out.header[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  out.header += text;
  for (auto& t : out.tensors) t.offset += out.header.size();
  out.file_size = out.header.size() + offset;
  return out;
}

SafetensorsLayout read_safetensors_layout(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + " is missing or unreadable");
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw std::runtime_error(path + " is missing or unreadable");
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  unsigned char len_bytes[8];
  if (size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8))
    throw std::runtime_error(path + " is truncated: " + std::to_string(size) + " bytes, not even a header length");
  std::uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= std::uint64_t(len_bytes[i]) << (8 * i);
  if (len > size - 8 || len > (std::uint64_t(100) << 20))
    throw std::runtime_error(path + " is truncated or not safetensors: its header claims " + std::to_string(len) +
                             " bytes, the file has " + std::to_string(size));
  std::string text(len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(len));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const std::exception&) {
    throw std::runtime_error(path + " has a corrupted header (not JSON)");
  }
  SafetensorsLayout out;
  out.header.assign(reinterpret_cast<const char*>(len_bytes), 8);
  out.header += text;
  out.file_size = size;
  std::uint64_t end = 0;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    try {
      TensorLayout t{it.key(), it->at("dtype").get<std::string>(), it->at("shape").get<std::vector<std::int64_t>>()};
      const auto off = it->at("data_offsets").get<std::vector<std::uint64_t>>();
      if (off.size() != 2 || off[1] < off[0] || off[1] - off[0] != elements(t.shape) * dtype_bytes(t.dtype))
        throw std::runtime_error("bad data_offsets");
      t.offset = 8 + len + off[0];
      t.bytes = off[1] - off[0];
      end = std::max(end, t.offset + t.bytes);
      out.tensors.push_back(std::move(t));
    } catch (const std::exception&) {
      throw std::runtime_error(path + ": the header entry of tensor '" + it.key() + "' is corrupted");
    }
  }
  if (end > size)
    throw std::runtime_error(path + " is truncated: " + std::to_string(size) + " bytes, its header needs " +
                             std::to_string(end));
  return out;
}

TensorEntry f32_tensor(const std::vector<float>& values, std::vector<std::int64_t> shape) {
  TensorEntry t{"F32", std::move(shape), std::vector<char>(values.size() * sizeof(float))};
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

void write_safetensors(const std::string& path, const std::map<std::string, TensorEntry>& tensors,
                       const nlohmann::json& metadata) {
  std::vector<TensorLayout> order;
  for (const auto& [name, t] : tensors) order.push_back({name, t.dtype, t.shape});
  std::string bytes = plan_safetensors(order, metadata).header;
  for (const auto& [name, t] : tensors) bytes.append(t.bytes.data(), t.bytes.size());
  write_file_atomic(path, bytes);
}

}  // namespace kformer
