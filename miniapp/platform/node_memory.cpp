// The memory of this node and of the job's cgroup (see node_memory.hpp).
#include "platform/node_memory.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace kformer {
namespace {

// The number in `file` (a cgroup limit), or 0 when it is missing, "max" or not a number.
double read_limit(const std::string& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    return used == text.size() && v > 0 ? v : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

// The smallest limit on `dir` under `base` and its ancestors, each read from base + path + file.
double smallest_limit_up(const std::string& base, std::string path, const std::string& file) {
  double best = 0;
  for (;;) {
    const double v = read_limit(base + (path == "/" ? "" : path) + "/" + file);
    if (v > 0 && (best == 0 || v < best)) best = v;
    if (path.empty() || path == "/") break;
    const auto cut = path.find_last_of('/');
    path = cut == 0 || cut == std::string::npos ? "/" : path.substr(0, cut);
  }
  return best;
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0;
}

std::string slurp(const std::string& file) {
  std::ifstream in(file);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

double cgroup_memory_limit(const std::string& self_cgroup, const std::string& root) {
  // A v1 limit that no one set reads as a huge number (2^63 rounded to pages): not a limit.
  constexpr double kUnset = 1e18;
  double best = 0;
  std::istringstream lines(self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // "hierarchy-id:controllers:path"; v2 is "0::path".
    const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    double v = 0;
    if (controllers.empty()) {
      v = smallest_limit_up(root, path, "memory.max");
      if (v == 0) v = smallest_limit_up(root + "/unified", path, "memory.max");  // hybrid layouts
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      v = smallest_limit_up(root + "/memory", path, "memory.limit_in_bytes");
    }
    if (v > 0 && v < kUnset && (best == 0 || v < best)) best = v;
  }
  return best;
}

NodeMemory probe_node_memory(int ranks_on_node) {
  NodeMemory m;
  m.ranks = ranks_on_node > 0 ? ranks_on_node : 1;
  m.bytes = physical_memory_bytes();
  m.source = "physical memory";
  const double cg = cgroup_memory_limit(slurp("/proc/self/cgroup"), "/sys/fs/cgroup");
  if (cg > 0 && (m.bytes == 0 || cg < m.bytes)) {
    m.bytes = cg;
    m.source = "cgroup memory limit";
  }
  return m;
}

}  // namespace kformer
