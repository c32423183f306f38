// Writing a JSON document atomically (write_file_atomic: to PATH.tmp, synced, then renamed), so
// that a reader never sees a half-written report or trace. `key` names the deck key the path came
// from, for the error line.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kformer {

void write_json(const std::string& path, const nlohmann::json& j, const std::string& key, int indent = -1);

}  // namespace kformer
