// The run of one deck: resolve the configuration, build the mesh, report. main() only
// initialises the runtimes and hands over to run_app().
#pragma once

#include "cli.hpp"
#include "comm/runtime.hpp"

namespace kformer {

int run_app(const CliArgs& args, comm::Runtime& runtime);

}  // namespace kformer
