// The command line: `kformer DECK [key=value ...]`, plus --version, --keys and --help.
// --kokkos-* arguments are left for Kokkos and never rejected.
#pragma once

#include <string>
#include <vector>

namespace kformer {

struct CliArgs {
  std::string deck;
  std::vector<std::string> overrides;
  bool version = false;
  bool keys = false;
  bool dry_run = false;  // resolve, validate and print; no training
  bool exit_now = false;  // --help was answered
  int exit_code = 0;
};

// Throws ConfigError on a malformed command line.
CliArgs parse_cli(int argc, char** argv);

std::string version_text();
std::string keys_text();

}  // namespace kformer
