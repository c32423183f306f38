// The reference export (see reference_export.hpp).
#include "report/reference_export.hpp"

#include <cstring>

#include "io/safetensors.hpp"

namespace kformer {
namespace {

std::vector<float> host_copy(const float* device_ptr, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n));
  copy_to_host(device_ptr, n, out.data());
  return out;
}

}  // namespace

void export_reference(const std::string& path, const ParamStore& params, const DataSource& data,
                      std::int64_t first_sample, int batch, int seq_len) {
  std::map<std::string, TensorEntry> tensors;
  for (const auto& s : params.slots()) {
    params.require(s.spec.layer);
    const std::int64_t n = s.spec.real_rows * s.cols;  // one rank: the local block is the whole tensor
    std::vector<std::int64_t> shape = s.cols > 1 ? std::vector<std::int64_t>{s.spec.real_rows, s.cols}
                                                 : std::vector<std::int64_t>{s.spec.real_rows};
    tensors[s.spec.name] = f32_tensor(host_copy(params.v(s.spec.name).data(), n), shape);
    tensors["grad." + s.spec.name] = f32_tensor(host_copy(params.dv(s.spec.name).data(), n), shape);
  }
  std::vector<std::int32_t> tok(std::size_t(batch) * (seq_len + 1));
  data.fill(first_sample, batch, seq_len, tok.data());
  TensorEntry t{"I32", {batch, seq_len + 1}, std::vector<char>(tok.size() * sizeof(std::int32_t))};
  std::memcpy(t.bytes.data(), tok.data(), t.bytes.size());
  tensors["tokens"] = std::move(t);
  write_safetensors(path, tensors, {{"producer", "kformer reference export"}});
}

}  // namespace kformer
