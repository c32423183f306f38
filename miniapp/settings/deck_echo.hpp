// The resolved deck as the user wrote it and validation completed it: each key's value, where it
// came from, and what `auto` became. Printed at start-up, written into the report and saved with
// checkpoints; never read back by key (the run reads RunSettings).
#pragma once

#include <string>
#include <utility>
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
  // `startup` pairs a key with what start-up made of its auto, "native (fp32 0.41 vs ...)" for
  // kernels.gemm; an empty one adds nothing.
  std::string text(const std::vector<std::pair<std::string, std::string>>& startup = {}) const;
};

}  // namespace kformer
