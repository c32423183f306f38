// The decorators a run's communicator gets from the deck: comm.strict, comm.timeout_s and the
// emulated network (comm.emulate.*); the caller adds tracing. The run and kformer calibrate both
// build their communicator with these.
#pragma once

#include "comm/runtime.hpp"
#include "settings/run_settings.hpp"

namespace kformer {

comm::WorldOptions world_options(const CommSettings& c);

}  // namespace kformer
