// GoogleTest main for every kformer test: MPI (when built) and Kokkos set up once per process.
// Under mpiexec only rank 0 prints the progress; a failure on any rank fails its process and
// so the whole test.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <cstring>

#include "comm/allocation_registry.hpp"
#include "kformer_config.hpp"
#include "test_env.hpp"

namespace kformer::test {
namespace {
comm::Runtime* g_runtime = nullptr;
bool strict_from_env() {
  const char* v = std::getenv("KFORMER_COMM_STRICT");
  return v && std::strcmp(v, "true") == 0;
}
}
comm::Runtime& runtime() { return *g_runtime; }
std::unique_ptr<comm::Communicator> world() {
  comm::WorldOptions options;
  options.strict = strict_from_env();
  return comm::make_world(KFORMER_ENABLE_MPI ? "mpi" : "self", runtime(), options);
}
}  // namespace kformer::test

int main(int argc, char** argv) {
  kformer::comm::Runtime runtime(argc, argv);
  kformer::test::g_runtime = &runtime;
  ::testing::InitGoogleTest(&argc, argv);
  int rc = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    // Before any View exists, so that comm.strict (conformance cases, KFORMER_COMM_STRICT) knows them all.
    kformer::comm::AllocationRegistry::install();
    if (runtime.world_rank() != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
    }
    rc = RUN_ALL_TESTS();
  }
  return rc;
}
