// The deck path of kformer as one function of one input, for the fuzzer (fuzz_deck.sh) and for
// the replay of its corpus and crash reproducers (deck_replay). An input is a deck, optionally
// followed by a line "%%" and then the command line's overrides, one per line; a line
// "@world N" there sets the job's rank count (1 if none):
//
//   model:
//     n_layers: 4
//   %%
//   @world 4
//   parallel.tp=2
#pragma once

#include <string>

namespace kformer::fuzz {

struct DeckOutcome {
  bool accepted = false;  // false: refused with a ConfigError
  std::string message;    // the ConfigError's line when refused
};

// Loads the deck, applies the overrides and resolves and validates the result, as kformer does
// before it allocates anything, then runs what a run computes from a valid deck up to its first
// allocation (shapes, memory estimate, schedule, the resolved deck as text and JSON). Refusal must
// be a ConfigError of one printable line; anything else (another exception, a ConfigError after
// validation passed, a crash) is a bug: it is reported on stderr and the process aborts.
DeckOutcome run_deck_input(const std::string& input);

}  // namespace kformer::fuzz
