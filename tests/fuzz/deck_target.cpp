// The deck fuzz target and the function behind it (see deck_target.hpp).
#include "deck_target.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <vector>

#include "settings/config.hpp"
#include "platform/errors.hpp"
#include "plan/memory.hpp"
#include "model/model_spec.hpp"
#include "platform/node_memory.hpp"
#include "plan/run_plan.hpp"
#include "parallel/schedule.hpp"
#include "settings/schema.hpp"
#include "settings/read_settings.hpp"
#include "settings/validate.hpp"

namespace kformer::fuzz {
namespace {

constexpr int kMaxWorld = 4096;  // ranks; enough for every tp*pp the schema allows to divide

[[noreturn]] void bug(const std::string& what, const std::string& input) {
  std::fprintf(stderr, "deck fuzz: BUG: %s\n--- input (%zu bytes) ---\n%s\n---\n", what.c_str(), input.size(),
               printable(input, 4000).c_str());
  std::abort();
}

struct Parsed {
  std::string deck;
  std::vector<std::string> overrides;
  int world = 1;
};

// The deck ends at the first line that is exactly "%%"; the overrides follow it.
Parsed split(const std::string& input) {
  Parsed p;
  std::size_t mark = std::string::npos;  // where the "%%" line starts
  if (input.compare(0, 3, "%%\n") == 0 || input == "%%") mark = 0;
  else if (const std::size_t m = input.find("\n%%\n"); m != std::string::npos) mark = m + 1;
  else if (input.size() >= 3 && input.compare(input.size() - 3, 3, "\n%%") == 0) mark = input.size() - 2;
  p.deck = input.substr(0, mark);
  if (mark == std::string::npos) return p;
  std::stringstream lines(input.substr(std::min(mark + 3, input.size())));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    if (line.rfind("@world ", 0) == 0) {
      const long w = std::strtol(line.c_str() + 7, nullptr, 10);
      p.world = w < 1 ? 1 : w > kMaxWorld ? kMaxWorld : static_cast<int>(w);
      continue;
    }
    p.overrides.push_back(line);
  }
  return p;
}

// What kformer computes from a valid deck before it allocates: every step must accept what
// resolve_and_validate accepted.
void after_validation(const RunPlan& plan) {
  const RunSettings& s = plan.settings;
  for (int r = 0; r < s.parallel.pp; ++r) count_params(rank_params(plan.shape, plan.chunks, s.parallel.pp, r));
  describe(plan.memory);
  s.deck.text();
  s.deck.json.dump();  // the report's "config" at the end of the run: it must not throw then
}

}  // namespace

DeckOutcome run_deck_input(const std::string& input) {
  const Parsed p = split(input);
  Config cfg;
  RunPlan plan;
  DeckOutcome out;
  try {
    cfg.load_deck_text(p.deck, "deck.yaml");
    for (const auto& o : p.overrides) cfg.apply_override(o);
    resolve_and_validate(cfg, p.world);
    // The integers the settings keep in an int (all but train.seed) must fit one.
    for (const auto& k : schema())
      if (k.type == KeyType::integer && k.name != "train.seed" && k.name != "predict.world") cfg.i32(k.name);
    // The schedule of every rank; the memory estimate describes a step, which takes Kokkos.
    plan = plan_without_memory(read_settings(cfg));
  } catch (const ConfigError& e) {
    out.message = e.what();
    if (out.message.empty()) bug("a ConfigError without a message", input);
    if (out.message.size() > 2000) bug("a ConfigError of " + std::to_string(out.message.size()) + " bytes", input);
    if (!text_problem(out.message).empty())
      bug("a ConfigError that is not one printable line (" + text_problem(out.message) + "): " +
              printable(out.message, 400),
          input);
    return out;
  } catch (const std::exception& e) {
    bug(std::string("an exception other than ConfigError: ") + e.what(), input);
  }
  try {
    after_validation(plan);
  } catch (const std::exception& e) {
    bug(std::string("a deck that passed validation fails later: ") + e.what(), input);
  }
  out.accepted = true;
  return out;
}

}  // namespace kformer::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kformer::fuzz::run_deck_input(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
