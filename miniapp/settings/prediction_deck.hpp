// A deck read for `kformer predict` and `kformer calibrate`: the command line parsed as a run's
// (DECK [key=value ...]), the deck checked as a run checks it but at the world size predict.world
// (0: tp*pp*dp, dp 1 when the deck has none) instead of the job's. No memory check: whether the
// layout fits is the prediction's answer (checked against the profile).
#pragma once

#include <string>
#include <vector>

#include "settings/cli.hpp"
#include "settings/run_settings.hpp"

namespace kformer {

struct PredictionDeck {
  CliArgs cli;  // exit_now / version / keys: answered, nothing else to do
  RunSettings settings;
  int world = 1;
};

// args: what follows the subcommand. No deck (allowed when `deck_optional`): the schema's defaults.
PredictionDeck read_prediction_deck(const std::string& command, const std::vector<std::string>& args,
                                    bool deck_optional);

}  // namespace kformer
