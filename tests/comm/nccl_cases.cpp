// NCCL under test: one rank per GPU, so on a one-GPU machine this runs on one rank.
#include "comm/runtime.hpp"
#include "comm_cases.hpp"
#include "test_env.hpp"

namespace kformer::test {

std::vector<CommCase> comm_cases() {
  return {{"nccl", [] { return comm::make_world("nccl", runtime()); }, false}};
}

}  // namespace kformer::test
