// Ceilings that kernel benchmarks are judged against, measured in the same loop as the case on
// the benchmark's execution space, so that both see the same state of the machine: the vendor
// sgemm for compute-bound kernels, a copy of buffers far larger than the caches for memory-bound
// ones. `vs_ceiling` = achieved / ceiling, the median over the loop, with quartiles vs_q1, vs_q3.
#pragma once

#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>

#include <functional>
#include <initializer_list>
#include <string>

namespace kformer::bench {

using Exec = Kokkos::DefaultExecutionSpace;

// The call a compute-bound case is judged against: `run` performs `flops` floating-point
// operations (a vendor sgemm). `run` throws when this build has no vendor library.
struct Reference {
  std::function<void()> run;
  double flops = 0;
};

// The loop of a memory-bound case: times each fenced call of `f` (the manual time) and, after
// every block of calls that lasts as long as one copy, one copy of two 256 MiB buffers (bytes
// read + written per second). Counters: gflops (when flops > 0), gbps, copy_gbps (median of the
// copies), vs_ceiling (median over blocks of the block's gbps over its copy's) and vs_q1, vs_q3;
// after the loop, copy_same_gbps (a copy moving the case's bytes per call, by the same means) and
// vs_same_size (the case's gbps over it): what the case's size allows, launch and caches included.
void run_case(benchmark::State& state, const std::function<void()>& f, double flops, double bytes);

// The loop of a compute-bound case: every iteration times one fenced call of `f` (the manual
// time) and one of `ref.run`, in alternating order, so that both see the same state of the
// machine; a single ceiling measured before the case would carry the drift of a shared VM into
// the ratio. Counters: gflops, gbps, ceiling_gflops (median of the reference calls), vs_ceiling
// (median over iterations of the ratio of the pair's rates) and vs_q1, vs_q3 (its quartiles:
// the resolution of the figure). All four are NaN when the reference cannot run.
void run_case(benchmark::State& state, const std::function<void()>& f, double flops, double bytes,
              const Reference& ref);

// Registers a case with the settings all kernel cases share (manual time, milliseconds) and at
// least `min_time` seconds of timed calls of the case.
benchmark::internal::Benchmark* add_case(const std::string& name, std::function<void(benchmark::State&)> fn,
                                         double min_time = 0.3);

// One memory-bound case: `bytes` moved per call of the function `make` builds, lazily, inside
// the benchmark (so that only the cases run allocate).
void add_mem(const std::string& name, std::function<std::function<void()>()> make, double bytes);

// "4096x768" for {4096, 768}: a case name's shape part.
std::string dims(std::initializer_list<int> d);

}  // namespace kformer::bench
