// NCCL under test: one rank per GPU, so on a one-GPU machine this runs on one rank; plain, and
// under comm.strict (test_strict.cpp's rules checked in front of NCCL, as a strict GPU run has them).
#include "comm/runtime.hpp"
#include "comm_cases.hpp"
#include "test_env.hpp"

namespace kformer::test {

std::vector<CommCase> comm_cases() {
  return {{"nccl", [] { return comm::make_world("nccl", runtime()); }, false},
          {"strict_nccl", [] {
             comm::WorldOptions o;
             o.strict = true;
             return comm::make_world("nccl", runtime(), o);
           },
           false}};
}

}  // namespace kformer::test
