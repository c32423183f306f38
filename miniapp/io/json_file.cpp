// Atomic JSON files (see json_file.hpp).
#include "io/json_file.hpp"

#include <stdexcept>

#include "io/posix_file.hpp"

namespace kformer {

void write_json(const std::string& path, const nlohmann::json& j, const std::string& key, int indent) {
  try {
    write_file_atomic(path, j.dump(indent) + '\n');
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(key + "=" + path + ": " + e.what() + "; give a path in a writable directory");
  }
}

}  // namespace kformer
