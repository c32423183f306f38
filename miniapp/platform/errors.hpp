// Errors that stop a run. Each message names the cause and the fix in one line.
// Exit codes: 2 bad input, 3 training stopped (non-finite), 4 a hung or dead rank (the comm
// watchdog, comm/watchdog.hpp), 5 a checkpoint could not be written.
#pragma once

#include <stdexcept>
#include <string>

namespace kformer {

// A verdict every rank reaches identically, from the same global numbers: rank 0 reports it once
// and every rank exits with `exit_code`, without tearing the job down.
class CollectiveError : public std::runtime_error {
 public:
  CollectiveError(const std::string& what, int exit_code) : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad input (deck, overrides, layout): exit code 2.
class ConfigError : public CollectiveError {
 public:
  explicit ConfigError(const std::string& what) : CollectiveError(what, 2) {}
};

// Training cannot go on (train.max_nan non-finite iterations in a row): exit code 3.
class TrainingStopped : public CollectiveError {
 public:
  explicit TrainingStopped(const std::string& what) : CollectiveError(what, 3) {}
};

// A checkpoint save failed on some rank (disk full, no permission): exit code 5; the previous
// checkpoint is untouched.
class CheckpointError : public CollectiveError {
 public:
  explicit CheckpointError(const std::string& what) : CollectiveError(what, 5) {}
};

}  // namespace kformer
