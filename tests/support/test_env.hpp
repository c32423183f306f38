// What every kformer test process shares: the communication runtime set up by test_main.cpp,
// and the world communicator of the best compiled host backend.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "comm/runtime.hpp"

namespace kformer::test {

comm::Runtime& runtime();
// mpi when built with MPI, else self; strict (comm.strict) when KFORMER_COMM_STRICT=true, as ctest sets it
std::unique_ptr<comm::Communicator> world();

}  // namespace kformer::test
