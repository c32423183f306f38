// Ceilings that kernel benchmarks are judged against, measured in the same run on the benchmark's
// execution space: a reference call timed in the same loop as the case (the vendor sgemm for
// compute-bound kernels) or a copy bandwidth measured once (memory-bound kernels).
// `vs_ceiling` = achieved / ceiling.
#pragma once

#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>

#include <functional>
#include <string>

namespace kformer::bench {

using Exec = Kokkos::DefaultExecutionSpace;

// Median seconds of `reps` fenced calls of f (after one warm-up call).
double median_seconds(const std::function<void()>& f, int reps = 5);

// Copy bandwidth in GB/s (bytes read + bytes written per second) of a Kokkos copy loop over
// buffers far larger than the caches, measured once.
double copy_bandwidth_gbps();

// The call a compute-bound case is judged against: `run` performs `flops` floating-point
// operations (a vendor sgemm). `run` throws when this build has no vendor library.
struct Reference {
  std::function<void()> run;
  double flops = 0;
};

// The loop of a memory-bound case: times each fenced call of `f` (manual time), then sets
// counters gflops (when flops > 0), gbps (when bytes > 0) and vs_ceiling = gbps / copy bandwidth.
void run_case(benchmark::State& state, const std::function<void()>& f, double flops, double bytes);

// The loop of a compute-bound case: every iteration times one fenced call of `f` (the manual
// time) and one of `ref.run`, in alternating order, so that both see the same state of the
// machine; a single ceiling measured before the case would carry the drift of a shared VM into
// the ratio. Counters: gflops, gbps, ceiling_gflops (median of the reference calls), vs_ceiling
// (median over iterations of the ratio of the pair's rates) and vs_q1, vs_q3 (its quartiles:
// the resolution of the figure). All three are NaN when the reference cannot run.
void run_case(benchmark::State& state, const std::function<void()>& f, double flops, double bytes,
              const Reference& ref);

// Registers a case with the settings all kernel cases share (manual time, milliseconds) and at
// least `min_time` seconds of timed calls of the case.
benchmark::internal::Benchmark* add_case(const std::string& name, std::function<void(benchmark::State&)> fn,
                                         double min_time = 0.3);

}  // namespace kformer::bench
