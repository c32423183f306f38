// `kformer calibrate [DECK] [key=value ...]`: measures this machine at the shapes the deck needs
// (calibrate_kernels.hpp; every rank measures at once, as ranks of a run share the node) and,
// under mpirun, its communicator (calibrate_comm.hpp), then rank 0 writes the profile where
// predict looks by default (default_profile_path()), or to predict.machine. Measured GEMM and
// attention shapes are added to those of an existing profile there, so several decks can be
// calibrated into one file. Needs Kokkos started and the MPI runtime.
#pragma once

#include <string>
#include <vector>

#include "comm/runtime.hpp"

namespace kformer::predict {

int run_calibrate(const std::vector<std::string>& args, comm::Runtime& runtime);

}  // namespace kformer::predict
