// Start-up of a CUDA build: every rank's GPU (see gpu_placement.hpp).
#include "platform/gpu_placement.hpp"

#include <Kokkos_Core.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "platform/errors.hpp"
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace kformer {

namespace {

#if defined(KOKKOS_ENABLE_CUDA)
std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "an unnamed host";
  return name;
}

// "GPU-8e6f0c1a-..." as nvidia-smi -L writes it: unique across nodes, so two ranks that report
// the same one share a GPU whatever CUDA_VISIBLE_DEVICES each of them sees.
std::string gpu_uuid(int device) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "";
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", unsigned(static_cast<unsigned char>(prop.uuid.bytes[i])));
    out += hex;
    if (i == 3 || i == 5 || i == 7 || i == 9) out += "-";
  }
  return out;
}
#endif

}  // namespace

std::vector<GpuSeat> place_gpus(const std::vector<std::string>& args, const comm::Runtime& runtime) {
#if defined(KOKKOS_ENABLE_CUDA)
  GpuSeat me;
  me.world_rank = runtime.world_rank();
  me.host = host_name();
  me.node_rank = runtime.node_rank();
  me.ranks_on_node = runtime.ranks_on_node();
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) me.visible = v;
  me.user_choice = user_device_choice(args, [](const char* name) { return std::getenv(name); });
  const cudaError_t err = cudaGetDeviceCount(&me.gpu_count);
  if (err != cudaSuccess) {
    me.gpu_count = 0;
    me.cuda_error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
  }
  if (me.user_choice.empty()) {
    me.device = choose_device(me.node_rank, me.ranks_on_node, me.gpu_count);
    if (me.device >= 0) me.gpu_id = gpu_uuid(me.device);
  }
  std::vector<GpuSeat> seats;
  for (const auto& text : runtime.allgather_text(encode_seat(me))) seats.push_back(decode_seat(text));
  const std::string problem = seats_problem(seats);
  if (!problem.empty()) throw ConfigError(problem);  // every rank holds every seat: the same verdict
  return seats;
#else
  (void)args;
  (void)runtime;
  return {};
#endif
}

int current_gpu() {
#if defined(KOKKOS_ENABLE_CUDA)
  int device = -1;
  if (cudaGetDevice(&device) == cudaSuccess) return device;
#endif
  return -1;
}

std::vector<std::string> kokkos_device_arguments(const std::vector<GpuSeat>& seats, int world_rank) {
  if (seats.empty() || seats[std::size_t(world_rank)].device < 0) return {};
  return {kokkos_device_argument(seats[std::size_t(world_rank)].device)};
}

void check_kokkos_took_seat(const std::vector<GpuSeat>& seats, int world_rank) {
  if (seats.empty()) return;
  const GpuSeat& me = seats[std::size_t(world_rank)];
  if (me.device >= 0 && current_gpu() != me.device)
    throw std::runtime_error("Kokkos runs on GPU " + std::to_string(current_gpu()) + " but kformer chose GPU " +
                             std::to_string(me.device) + " (" + kokkos_device_argument(me.device) +
                             "): report this Kokkos version; meanwhile choose with KOKKOS_DEVICE_ID per rank");
}

KokkosArguments::KokkosArguments(int argc, char** argv, const std::vector<std::string>& extra) {
  for (int i = 0; i < argc; ++i) strings_.emplace_back(argv[i]);
  strings_.insert(strings_.end(), extra.begin(), extra.end());
  for (auto& s : strings_) pointers_.push_back(&s[0]);
  pointers_.push_back(nullptr);  // argv[argc] is null, as the C runtime leaves it
  argc_ = int(strings_.size());
}

}  // namespace kformer
