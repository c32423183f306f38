// Start-up of a CUDA build: every rank's GPU chosen (gpu_choice.hpp) from what its CUDA runtime
// reports, before Kokkos starts, and handed to Kokkos as an added argument. Host builds choose
// nothing and add nothing.
#pragma once

#include <string>
#include <vector>

#include "comm/runtime.hpp"
#include "platform/gpu_choice.hpp"

namespace kformer {

// Every rank's seat, in world-rank order (gathered: collective over the job). Throws ConfigError
// on every rank when some rank has no GPU of its own. `args` is the whole command line, whose
// --kokkos-* arguments may already choose the device. Host builds: returns {} at once.
std::vector<GpuSeat> place_gpus(const std::vector<std::string>& args, const comm::Runtime& runtime);

// The CUDA device this rank runs on once Kokkos has started (cudaGetDevice); -1 in host builds.
int current_gpu();

// What main() adds to Kokkos' arguments for rank `world_rank`: its seat's device, or nothing
// where the user chose (or in host builds, `seats` empty). A run and kformer calibrate both start
// Kokkos this way.
std::vector<std::string> kokkos_device_arguments(const std::vector<GpuSeat>& seats, int world_rank);

// Once Kokkos has started: throws when it runs on another GPU than kformer chose for this rank
// (a Kokkos that ignored the argument would put ranks on one GPU). Nothing in host builds.
void check_kokkos_took_seat(const std::vector<GpuSeat>& seats, int world_rank);

// argc/argv for Kokkos: the program's own, plus `extra` arguments. Owns the strings.
class KokkosArguments {
 public:
  KokkosArguments(int argc, char** argv, const std::vector<std::string>& extra);
  KokkosArguments(const KokkosArguments&) = delete;  // argv points into strings_
  KokkosArguments& operator=(const KokkosArguments&) = delete;
  int& argc() { return argc_; }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
  int argc_ = 0;
};

}  // namespace kformer
