// The resolved deck as the user wrote it and validation completed it: each key's value, where it
// came from, and what `auto` became. Printed at start-up, written into the report and saved with
// checkpoints; never read back by key (the run reads RunSettings).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kformer {

struct DeckLine {
  std::string key, value, origin;  // origin: "default", the deck's path, "command line", "derived"
  std::string auto_reason;         // when the deck said auto (comm.backend): why it became `value`
};

struct DeckEcho {
  std::vector<DeckLine> lines;  // in the schema's order
  nlohmann::json json;          // nested, as a deck would be written

  // "key = value   (origin)", one per line; "auto -> value (why)" where validation resolved auto;
  // `gemm_choice` non-empty: kernels.gemm=auto's start-up choice, "native (fp32 0.41 vs ...)".
  std::string text(const std::string& gemm_choice = "") const;
};

}  // namespace kformer
