// `kformer predict DECK [key=value ...]`: one process, no MPI launch, no model allocated. The
// deck is read and checked as a run reads it, at the world size predict.world (0: tp*pp*dp with
// dp from the deck, 1 when it has none); the step is simulated on the machine profile
// predict.machine (default_profile_path() when empty); the summary is printed as a run prints
// it, output.json gets the run's report fields and output.trace=DIR a trace.json of the step.
#pragma once

#include <string>
#include <vector>

namespace kformer::predict {

// args: what follows "predict" on the command line. Returns the exit code; throws ConfigError.
int run_predict(const std::vector<std::string>& args);

}  // namespace kformer::predict
