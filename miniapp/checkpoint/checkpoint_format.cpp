// The universal checkpoint's names and layouts (see checkpoint_format.hpp).
#include "checkpoint/checkpoint_format.hpp"

#include <cstdio>

namespace kformer {

std::string iteration_dir_name(int iteration) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07d", iteration);
  return buf;
}

std::vector<std::int64_t> checkpoint_shape(const ParamSpec& spec) {
  if (spec.cols == 1) return {spec.real_rows};
  return {spec.real_rows, spec.cols};
}

std::string moment_name(int moment, const std::string& param) {
  return (moment == 1 ? "exp_avg." : "exp_avg_sq.") + param;
}

std::string part_tensor(int part, const std::string& param) {
  return part == 0 ? param : moment_name(part, param);
}

SafetensorsLayout model_file_layout(const std::vector<ParamSpec>& specs, const nlohmann::json& metadata) {
  std::vector<TensorLayout> tensors;
  for (const auto& s : specs) tensors.push_back({s.name, "F32", checkpoint_shape(s)});
  return plan_safetensors(tensors, metadata);
}

SafetensorsLayout optimizer_file_layout(const std::vector<ParamSpec>& specs, const nlohmann::json& metadata) {
  std::vector<TensorLayout> tensors;
  for (int m = 1; m <= 2; ++m)
    for (const auto& s : specs) tensors.push_back({moment_name(m, s.name), "F32", checkpoint_shape(s)});
  return plan_safetensors(tensors, metadata);
}

nlohmann::json model_keys(const nlohmann::json& deck) {
  nlohmann::json out = nlohmann::json::object();
  if (deck.contains("model"))
    for (const char* k : {"family", "n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_dim", "vocab_size",
                          "max_seq_len"})
      if (deck["model"].contains(k)) out[std::string("model.") + k] = deck["model"][k];
  return out;
}

}  // namespace kformer
