// Ceilings that kernel benchmarks are judged against, measured once per run on the benchmark's
// execution space and cached: the vendor GEMM at a given shape (compute-bound kernels) and a
// copy bandwidth (memory-bound kernels). `vs_ceiling` = achieved / ceiling.
#pragma once

#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>

#include <functional>
#include <string>

namespace kformer::bench {

using Exec = Kokkos::DefaultExecutionSpace;

// Median seconds of `reps` fenced calls of f (after one warm-up call).
double median_seconds(const std::function<void()>& f, int reps = 5);

// GFLOP/s of `run` (which performs `flops` floating-point operations), measured once per `key`
// and cached; NaN when `run` throws (no vendor library in this build).
double ceiling_gflops(const std::string& key, double flops, const std::function<void()>& run);

// Copy bandwidth in GB/s (bytes read + bytes written per second) of a Kokkos copy loop over
// buffers far larger than the caches, measured once.
double copy_bandwidth_gbps();

// The benchmark loop every case uses: times each fenced call of `f` (manual time), then sets
// counters gflops (when flops > 0), gbps (when bytes > 0) and vs_ceiling = gflops / ceiling for a
// GEMM-like case (ceiling_gflops > 0) or gbps / copy bandwidth otherwise.
void run_case(benchmark::State& state, const std::function<void()>& f, double flops, double bytes,
              double ceiling_gflops_value = 0.0);

// Registers a case with the settings all kernel cases share (manual time, milliseconds).
benchmark::internal::Benchmark* add_case(const std::string& name, std::function<void(benchmark::State&)> fn);

}  // namespace kformer::bench
