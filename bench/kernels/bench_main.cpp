// main of kformer-kernel-bench: Kokkos around Google Benchmark. The cases live one file per
// kernel family (bench_gemm.cpp, ...) and register themselves; this file knows none of them.
// Usage: OMP_NUM_THREADS=2 OMP_PROC_BIND=false kformer-kernel-bench [--benchmark_filter=gemm/]
//        [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>

#include "crash_report.hpp"
#include "kformer_config.hpp"
#include "kformer_version.hpp"

int main(int argc, char** argv) {
  kformer::bench::report_crashes();  // a crashed case names itself (crash_report.hpp)
  Kokkos::ScopeGuard kokkos(argc, argv);  // takes the --kokkos-* flags out of argv
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("kokkos_execution_space", Kokkos::DefaultExecutionSpace::name());
  benchmark::AddCustomContext("kokkos_concurrency", std::to_string(Kokkos::DefaultExecutionSpace().concurrency()));
  benchmark::AddCustomContext("blas", KFORMER_BLAS_KIND);
  benchmark::AddCustomContext("kformer_git", KFORMER_GIT_HASH);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
