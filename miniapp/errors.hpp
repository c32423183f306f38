// Errors that stop a run. Each message names the cause and the fix in one line.
#pragma once

#include <stdexcept>
#include <string>

namespace kformer {

// Bad input that every rank sees identically (deck, overrides, layout): rank 0 reports it.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace kformer
