// The command line (see cli.hpp), parsed with CLI11.
#include "settings/cli.hpp"

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>

#include <sstream>

#include "platform/errors.hpp"
#include "kformer_config.hpp"
#include "kformer_version.hpp"
#include "settings/schema.hpp"

namespace kformer {

CliArgs parse_cli(int argc, char** argv) {
  CliArgs out;
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {  // CLI11 takes them reversed
    const std::string a = argv[i];
    if (a.rfind("--kokkos-", 0) == 0 || a.rfind("--kokkos_", 0) == 0) continue;  // Kokkos' own
    args.push_back(a);
  }
  CLI::App app{"kformer: a Kokkos proxy app for distributed transformer training", "kformer"};
  app.add_flag("--version", out.version, "print version, git hash and build options");
  app.add_flag("--keys", out.keys, "list every deck key with its type, default and meaning");
  app.add_flag("--dry-run", out.dry_run, "resolve and validate the deck, print it and the mesh, do not train");
  std::vector<std::string> positional;
  app.add_option("deck_and_overrides", positional, "DECK [key=value ...]");
  app.footer("Example: mpirun -n 4 kformer input/gpt3-small.yaml parallel.tp=2 train.steps=5");
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    out.exit_now = true;
    out.exit_code = app.exit(e);
    return out;
  } catch (const CLI::ParseError& e) {
    throw ConfigError(std::string(e.what()) + ": usage is kformer DECK [key=value ...] (see kformer --help)");
  }
  if (out.version || out.keys) return out;
  if (positional.empty())
    throw ConfigError("no deck given: usage is kformer DECK [key=value ...], e.g. kformer input/tiny.yaml");
  out.deck = positional.front();
  if (out.deck.find('=') != std::string::npos && out.deck.find(".yaml") == std::string::npos)
    throw ConfigError("the first argument '" + out.deck + "' looks like an override: give the deck first, "
                      "e.g. kformer input/tiny.yaml " + out.deck);
  out.overrides.assign(positional.begin() + 1, positional.end());
  return out;
}

std::string version_text() {
  std::ostringstream os;
  os << "kformer " << KFORMER_VERSION << " (git " << KFORMER_GIT_HASH << ", " << KFORMER_BUILD_TYPE << ")\n"
     << "  compiler: " << KFORMER_CXX_COMPILER << "\n"
     << "  Kokkos:   " << KOKKOS_VERSION / 10000 << "." << (KOKKOS_VERSION / 100) % 100 << "."
     << KOKKOS_VERSION % 100 << " (" << KFORMER_KOKKOS_DEVICES << ")\n"
     << "  MPI:      " << (KFORMER_ENABLE_MPI ? "on" : "off") << "\n"
     << "  NCCL:     " << (KFORMER_ENABLE_NCCL ? "on" : "off") << "\n"
     << "  BLAS:     " << (KFORMER_ENABLE_BLAS ? KFORMER_BLAS_KIND : "off") << "\n"
     << "  cuDNN:    " << (KFORMER_HAVE_CUDNN ? "on (kernels.attention=vendor; libcudnn.so.9 opened at run time)" : "off")
     << "\n";
  return os.str();
}

std::string keys_text() {
  std::ostringstream os;
  for (const auto& k : schema())
    os << k.name << " = " << format_value(k.default_value) << "\n    " << describe_valid(k) << ": " << k.help
       << "\n";
  return os.str();
}

}  // namespace kformer
