// Decks for predict and calibrate (see deck_for_prediction.hpp).
#include "deck_for_prediction.hpp"

#include <algorithm>

#include "errors.hpp"
#include "node_memory.hpp"
#include "schema.hpp"
#include "validate.hpp"

namespace kformer::predict {

PredictionDeck read_prediction_deck(const std::string& command, const std::vector<std::string>& args,
                                    bool deck_optional) {
  PredictionDeck d;
  if (args.empty() && deck_optional) {
    d.cli.deck = "(schema defaults)";
  } else {
    std::vector<std::string> text = {"kformer " + command};
    text.insert(text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : text) argv.push_back(a.data());
    d.cli = parse_cli(int(argv.size()), argv.data());
    if (d.cli.exit_now || d.cli.version || d.cli.keys) return d;
    d.cfg.load_deck_file(d.cli.deck);
    for (const auto& o : d.cli.overrides) d.cfg.apply_override(o);
  }
  Config& cfg = d.cfg;
  std::int64_t world = cfg.i64("predict.world");
  if (world == 0)
    world = cfg.i64("parallel.tp") * cfg.i64("parallel.pp") * std::max<std::int64_t>(1, cfg.i64("parallel.dp"));
  if (world > (1 << 24)) throw ConfigError("predict.world=" + std::to_string(world) + " exceeds 16777216 ranks");
  d.world = int(world);
  const std::string limit = format_value(cfg.f64("memory.limit_gb"));
  const std::string origin = cfg.origin("memory.limit_gb");
  cfg.set("memory.limit_gb", "0", origin);
  resolve_and_validate(cfg, d.world, NodeMemory{});
  cfg.set("memory.limit_gb", limit, origin);
  return d;
}

}  // namespace kformer::predict
