// The communicators a conformance executable runs its suite on. Each executable links one
// definition of comm_cases(): the host backends and their decorators (host_cases.cpp), or
// NCCL (nccl_cases.cpp), so the same tests hold every backend to the same results.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace kformer::test {

struct CommCase {
  std::string name;  // a GoogleTest parameter name: letters, digits, underscores
  std::function<std::unique_ptr<comm::Communicator>()> make;
  bool one_rank_only = false;  // self: skipped when the job has more ranks
};

std::vector<CommCase> comm_cases();

}  // namespace kformer::test
