// Host backends under test: self (one rank), mpi, and mpi inside each decorator. The emulated
// case uses a small latency so the decorator's waiting path runs without slowing the suite.
#include <memory>

#include "comm/emulated_comm.hpp"
#include "comm/runtime.hpp"
#include "comm/self_comm.hpp"
#include "comm/trace_log.hpp"
#include "comm/traced_comm.hpp"
#include "comm_cases.hpp"
#include "kformer_config.hpp"
#include "test_env.hpp"

namespace kformer::test {

std::vector<CommCase> comm_cases() {
  using namespace kformer::comm;
  std::vector<CommCase> cases;
  cases.push_back({"self", [] { return make_world("self", runtime()); }, true});
  cases.push_back({"traced_emulated_self", [] {
                     WorldOptions o;
                     o.emulate = {20.0, 100.0};
                     o.trace = std::make_shared<TraceLog>();
                     return make_world("self", runtime(), o);
                   },
                   true});
  cases.push_back({"strict_self", [] {
                     WorldOptions o;
                     o.strict = true;
                     return make_world("self", runtime(), o);
                   },
                   true});
  if (KFORMER_ENABLE_MPI) {
    cases.push_back({"mpi", [] { return make_world("mpi", runtime()); }, false});
    cases.push_back({"strict_mpi", [] {
                       WorldOptions o;
                       o.strict = true;
                       return make_world("mpi", runtime(), o);
                     },
                     false});
    cases.push_back({"strict_traced_emulated_mpi", [] {
                       WorldOptions o;
                       o.strict = true;
                       o.emulate = {20.0, 100.0};
                       o.trace = std::make_shared<TraceLog>();
                       return make_world("mpi", runtime(), o);
                     },
                     false});
    cases.push_back({"emulated_mpi", [] {
                       WorldOptions o;
                       o.emulate = {20.0, 100.0};
                       return make_world("mpi", runtime(), o);
                     },
                     false});
    cases.push_back({"traced_mpi", [] {
                       WorldOptions o;
                       o.trace = std::make_shared<TraceLog>();
                       return make_world("mpi", runtime(), o);
                     },
                     false});
  }
  return cases;
}

}  // namespace kformer::test
