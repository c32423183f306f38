// Decks for predict and calibrate (see prediction_deck.hpp).
#include "settings/prediction_deck.hpp"

#include <algorithm>

#include "settings/config.hpp"
#include "platform/errors.hpp"
#include "settings/read_settings.hpp"
#include "settings/validate.hpp"

namespace kformer {

PredictionDeck read_prediction_deck(const std::string& command, const std::vector<std::string>& args,
                                    bool deck_optional) {
  PredictionDeck d;
  Config cfg;
  if (args.empty() && deck_optional) {
    d.cli.deck = "(schema defaults)";
  } else {
    std::vector<std::string> text = {"kformer " + command};
    text.insert(text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : text) argv.push_back(a.data());
    d.cli = parse_cli(int(argv.size()), argv.data());
    if (d.cli.exit_now || d.cli.version || d.cli.keys) return d;
    cfg.load_deck_file(d.cli.deck);
    for (const auto& o : d.cli.overrides) cfg.apply_override(o);
  }
  std::int64_t world = cfg.i64("predict.world");
  if (world == 0)
    world = cfg.i64("parallel.tp") * cfg.i64("parallel.pp") * std::max<std::int64_t>(1, cfg.i64("parallel.dp"));
  if (world > (1 << 24)) throw ConfigError("predict.world=" + std::to_string(world) + " exceeds 16777216 ranks");
  d.world = int(world);
  resolve_and_validate(cfg, d.world);
  d.settings = read_settings(cfg);
  return d;
}

}  // namespace kformer
