// Which GPU each rank runs on (see gpu_choice.hpp).
#include "platform/gpu_choice.hpp"

#include <map>
#include <set>
#include <stdexcept>

namespace kformer {

namespace {

// Kokkos' own ways of choosing a device: 3.4.01 reads --kokkos-device-id, --kokkos-device,
// --kokkos-num-devices, --kokkos-ndevices, KOKKOS_DEVICE_ID, KOKKOS_NUM_DEVICES and
// KOKKOS_RAND_DEVICES; 4.x reads --kokkos-device-id, --kokkos-map-device-id-by, KOKKOS_DEVICE_ID,
// KOKKOS_MAP_DEVICE_ID_BY and KOKKOS_VISIBLE_DEVICES (whose entries --kokkos-device-id indexes).
const char* const kChoiceArguments[] = {"--kokkos-device-id", "--kokkos-device", "--kokkos-num-devices",
                                        "--kokkos-ndevices", "--kokkos-map-device-id-by"};
const char* const kChoiceVariables[] = {"KOKKOS_DEVICE_ID", "KOKKOS_NUM_DEVICES", "KOKKOS_RAND_DEVICES",
                                        "KOKKOS_MAP_DEVICE_ID_BY", "KOKKOS_VISIBLE_DEVICES"};

constexpr char kSep = '\x1f';  // between the fields of an encoded seat (no host name or message has it)

std::string clean(std::string s) {
  for (char& c : s)
    if (c == kSep || c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string visible_note(const GpuSeat& s) {
  return s.visible.empty() ? std::string("CUDA_VISIBLE_DEVICES unset") : "CUDA_VISIBLE_DEVICES=" + s.visible;
}

// The physical GPU behind a seat: its UUID, or (unknown) what the rank sees and picks on its host.
std::string gpu_key(const GpuSeat& s) {
  return s.gpu_id.empty() ? s.host + "|" + s.visible + "|" + std::to_string(s.device) : s.gpu_id;
}

}  // namespace

std::string user_device_choice(const std::vector<std::string>& args,
                               const std::function<const char*(const char*)>& env) {
  for (const auto& a : args)
    for (const char* name : kChoiceArguments) {
      const std::string n = name;
      if (a == n || a.rfind(n + "=", 0) == 0) return a;
    }
  for (const char* name : kChoiceVariables)
    if (const char* v = env(name)) return std::string(name) + "=" + v;
  return "";
}

int choose_device(int node_rank, int ranks_on_node, int gpu_count) {
  if (gpu_count <= 0) return -1;
  if (gpu_count >= ranks_on_node) return node_rank;  // the node's GPUs, one each
  return node_rank % gpu_count;  // 1 visible: the launcher's own binding; else shared (seats_problem says so)
}

std::string kokkos_device_argument(int device) { return "--kokkos-device-id=" + std::to_string(device); }

std::string encode_seat(const GpuSeat& s) {
  const std::string sep(1, kSep);
  return std::to_string(s.world_rank) + sep + clean(s.host) + sep + std::to_string(s.node_rank) + sep +
         std::to_string(s.ranks_on_node) + sep + std::to_string(s.gpu_count) + sep + clean(s.cuda_error) + sep +
         clean(s.visible) + sep + clean(s.user_choice) + sep + std::to_string(s.device) + sep + clean(s.gpu_id);
}

GpuSeat decode_seat(const std::string& text) {
  std::vector<std::string> f;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == kSep) {
      f.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  if (f.size() != 10) throw std::logic_error("a gathered GPU seat has " + std::to_string(f.size()) + " fields, not 10");
  GpuSeat s;
  s.world_rank = std::stoi(f[0]);
  s.host = f[1];
  s.node_rank = std::stoi(f[2]);
  s.ranks_on_node = std::stoi(f[3]);
  s.gpu_count = std::stoi(f[4]);
  s.cuda_error = f[5];
  s.visible = f[6];
  s.user_choice = f[7];
  s.device = std::stoi(f[8]);
  s.gpu_id = f[9];
  return s;
}

std::string seats_problem(const std::vector<GpuSeat>& seats) {
  for (const auto& s : seats)
    if (s.gpu_count <= 0)
      return "kformer is built for CUDA but rank " + std::to_string(s.world_rank) + " on " + s.host +
             " sees no GPU (" + (s.cuda_error.empty() ? std::string("0 devices") : s.cuda_error) + "; " +
             visible_note(s) + "): run it on a GPU node, check CUDA_VISIBLE_DEVICES, or use a host build "
             "(cmake --preset default)";
  std::map<std::string, const GpuSeat*> taken;  // physical GPU -> the first rank on it
  for (const auto& s : seats) {
    if (s.device < 0) continue;  // the user chose: sharing may be meant (MPS)
    const auto it = taken.find(gpu_key(s));
    if (it == taken.end()) {
      taken.emplace(gpu_key(s), &s);
      continue;
    }
    std::set<std::string> gpus;  // what the ranks of this host reach between them
    for (const auto& o : seats)
      if (o.host == s.host && o.device >= 0) gpus.insert(gpu_key(o));
    const std::string m = std::to_string(gpus.size());
    return "ranks " + std::to_string(it->second->world_rank) + " and " + std::to_string(s.world_rank) + " on " +
           s.host + " would share GPU " + std::to_string(s.device) + ": the node has " +
           std::to_string(s.ranks_on_node) + " ranks but they see " + m + " GPU(s) between them (" +
           visible_note(s) + "): launch at most " + m + " rank(s) per node (mpiexec --ppn " + m +
           ", srun --ntasks-per-node=" + m + "), or make more GPUs visible with CUDA_VISIBLE_DEVICES";
  }
  return "";
}

std::string describe_seat(const GpuSeat& s) {
  std::string out = "rank " + std::to_string(s.world_rank) + " on " + s.host + ": ";
  const std::string where = "node rank " + std::to_string(s.node_rank) + " of " + std::to_string(s.ranks_on_node);
  if (s.device < 0)
    return out + "GPU chosen by " + s.user_choice + " (" + where + ", " + std::to_string(s.gpu_count) +
           " GPU(s) visible)";
  out += "GPU " + std::to_string(s.device) + " of " + std::to_string(s.gpu_count) + " (" + where +
         ", chosen by kformer, " + visible_note(s) + ")";
  if (!s.gpu_id.empty()) out += " " + s.gpu_id;
  return out;
}

}  // namespace kformer
