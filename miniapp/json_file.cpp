// Atomic JSON files (see json_file.hpp).
#include "json_file.hpp"

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace kformer {

void write_json(const std::string& path, const nlohmann::json& j, const std::string& key, int indent) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error(key + "=" + path + ": cannot write there; give a path in a writable directory");
    out << j.dump(indent) << '\n';
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error(key + "=" + path + ": cannot rename " + tmp + " into place");
}

}  // namespace kformer
