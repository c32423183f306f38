// Which GPU each rank runs on, decided from plain numbers so that tests can use fake ones.
// kformer picks the GPU itself from the node-local rank (launchers differ in what they tell
// Kokkos, and without a choice every rank of a node lands on GPU 0), unless the user already
// chose with Kokkos' own arguments or variables: then Kokkos does as told. The job-wide verdict
// (no GPU, or two ranks on one GPU) is taken from every rank's seat, so every rank reaches it.
// gpu_placement.cpp feeds it the CUDA runtime's answers; only CUDA builds call it.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace kformer {

// The Kokkos argument or variable by which the user already chose the device (e.g.
// "--kokkos-device-id=2", "KOKKOS_DEVICE_ID=2", "--kokkos-map-device-id-by=mpi_rank"); empty
// when none did. `env` looks a variable up (std::getenv in the program).
std::string user_device_choice(const std::vector<std::string>& args,
                               const std::function<const char*(const char*)>& env);

// The device of node-local rank `node_rank` when its CUDA runtime sees `gpu_count` GPUs
// (CUDA_VISIBLE_DEVICES applied) and the node has `ranks_on_node` ranks: its own GPU when all of
// the node's GPUs are visible, GPU 0 of what it sees when the launcher gave each rank its own
// (one visible GPU per rank), round robin otherwise; -1 when it sees none.
int choose_device(int node_rank, int ranks_on_node, int gpu_count);

// The argument that hands `device` to Kokkos, spelled as both 3.4 and 4.x read it.
std::string kokkos_device_argument(int device);

// One rank's place: where it runs, what its CUDA runtime sees, and what it will use.
struct GpuSeat {
  int world_rank = 0;
  std::string host;
  int node_rank = 0, ranks_on_node = 1;
  int gpu_count = 0;        // cudaGetDeviceCount (0 when it failed)
  std::string cuda_error;   // why gpu_count is 0, from CUDA
  std::string visible;      // CUDA_VISIBLE_DEVICES as set ("" when unset)
  std::string user_choice;  // user_device_choice(); when set, kformer chooses nothing
  int device = -1;          // choose_device(), or -1 when the user chose
  std::string gpu_id;       // the physical GPU behind `device` (its UUID), "" when unknown
};

// A seat as one line of text and back, to gather every rank's over MPI before Kokkos starts.
std::string encode_seat(const GpuSeat& seat);
GpuSeat decode_seat(const std::string& text);

// Empty when every rank has a GPU of its own; otherwise the one-line message of the first
// problem (a rank without GPU, or two ranks on one physical GPU), naming the fix.
std::string seats_problem(const std::vector<GpuSeat>& seats);

// "rank 1 on nid001: GPU 1 of 4 (node rank 1 of 4, chosen by kformer)".
std::string describe_seat(const GpuSeat& seat);

}  // namespace kformer
