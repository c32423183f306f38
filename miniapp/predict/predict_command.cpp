// The predict command (see predict_command.hpp).
#include "predict_command.hpp"

#include <sys/stat.h>

#include <chrono>
#include <iostream>

#include "cli.hpp"
#include "config.hpp"
#include "errors.hpp"
#include "json_file.hpp"
#include "memory.hpp"
#include "predict_report.hpp"
#include "schema.hpp"
#include "step_sim.hpp"
#include "validate.hpp"

namespace kformer::predict {

int run_predict(const std::vector<std::string>& args) {
  std::vector<std::string> argv_text = {"kformer predict"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  const CliArgs cli = parse_cli(int(argv.size()), argv.data());
  if (cli.exit_now) return cli.exit_code;
  if (cli.version || cli.keys) {
    std::cout << (cli.version ? version_text() : keys_text());
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  Config cfg;
  cfg.load_deck_file(cli.deck);
  for (const auto& o : cli.overrides) cfg.apply_override(o);
  // The world: predict.world, else the deck's tp*pp*dp.
  std::int64_t world = cfg.i64("predict.world");
  if (world == 0) world = cfg.i64("parallel.tp") * cfg.i64("parallel.pp") * std::max<std::int64_t>(1, cfg.i64("parallel.dp"));
  // Whether the layout fits is the prediction's answer, not a reason to refuse it: the limit is
  // checked after the simulation, against the profile's device (or memory.limit_gb).
  const std::string limit = format_value(cfg.f64("memory.limit_gb"));
  cfg.set("memory.limit_gb", "0", "predict");
  resolve_and_validate(cfg, int(world), NodeMemory{});
  cfg.set("memory.limit_gb", limit, cfg.origin("memory.limit_gb"));

  const std::string path = cfg.str("predict.machine").empty() ? default_profile_path() : cfg.str("predict.machine");
  struct stat st {};
  if (cfg.str("predict.machine").empty() && ::stat(path.c_str(), &st) != 0)
    throw ConfigError("no machine profile at " + path + ": run kformer calibrate DECK on this machine first, or give "
                      "predict.machine=FILE (e.g. input/machines/perlmutter-a100-40gb.yaml)");
  const MachineProfile profile = load_profile(path);
  const StepPrediction p = predict_step(cfg, profile, !cfg.str("output.trace").empty());
  const nlohmann::json report = predict_report(cfg, profile, p);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::cout << "kformer predict: deck " << cli.deck << " on " << world << " rank(s) (dp=" << cfg.i64("parallel.dp")
            << " pp=" << cfg.i64("parallel.pp") << " tp=" << cfg.i64("parallel.tp") << "), machine " << profile.name
            << " (" << path << ")"
            << (cfg.f64("comm.emulate.latency_us") > 0 || cfg.f64("comm.emulate.bandwidth_gbps") > 0
                    ? ", emulated network " + format_value(cfg.f64("comm.emulate.latency_us")) + " us, " +
                          format_value(cfg.f64("comm.emulate.bandwidth_gbps")) + " Gbit/s"
                    : std::string())
            << "\nmemory estimate per rank: " << describe(estimate_memory(cfg)) << "\n"
            << predict_summary_text(report) << "  predicted in " << took << " s\n"
            << std::flush;
  if (!cfg.str("output.json").empty()) write_json(cfg.str("output.json"), report, "output.json", 2);
  if (!cfg.str("output.trace").empty()) {
    ::mkdir(cfg.str("output.trace").c_str(), 0755);
    write_json(cfg.str("output.trace") + "/trace.json", predict_trace(p), "output.trace");
  }
  return 0;
}

}  // namespace kformer::predict
