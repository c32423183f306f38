// `kformer calibrate [DECK] [key=value ...]`: measures this machine at the shapes the deck needs
// (calibrate_kernels.hpp; every rank measures at once, as ranks of a run share the node) and,
// under mpirun, its communicator (calibrate_comm.hpp), then rank 0 writes the profile where
// predict looks by default (default_profile_path()), or to predict.machine. Measured GEMM and
// attention shapes are added to those of an existing profile there, so several decks can be
// calibrated into one file. Needs Kokkos started (on the GPU place_gpus chose: main() places the
// ranks as for a run) and the MPI runtime. Its communicator is a run's: the deck's backend
// (comm.backend=auto resolved), under comm.strict and the comm.timeout_s watchdog, without
// emulation or tracing; one rank uses self (no network to measure).
#pragma once

#include <string>
#include <vector>

#include "comm/runtime.hpp"
#include "platform/gpu_choice.hpp"

namespace kformer::predict {

// `gpus`: every rank's seat from place_gpus (empty in host builds).
int run_calibrate(const std::vector<std::string>& args, comm::Runtime& runtime, const std::vector<GpuSeat>& gpus = {});

}  // namespace kformer::predict
