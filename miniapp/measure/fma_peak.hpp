// The FMA peak of the execution space, measured: a few milliseconds of independent fused
// multiply-add chains, x = x * m + a, on every thread the space has. Each thread (a Kokkos
// work item) keeps its chains in registers: enough of them to cover the FMA latency on every FMA
// port (on the host the compiler turns them into full-width vector FMAs of the ISA the build
// targets, -march=native by default; on a GPU each CUDA thread runs a few chains and the
// hardware's threads cover the latency). No memory traffic: it measures the arithmetic ceiling
// of fp32 FMA at the clock the machine runs now, what a perfect GEMM could approach and never
// exceed on the same units (tensor cores, TF32/bf16 paths of a vendor GEMM are other units).
#pragma once

#include <string>

namespace kformer {

struct FmaPeak {
  double tflops = 0;      // best over the chain counts tried, 2 FLOPs per FMA
  int chains = 0;         // the chain count per work item that reached it
  long work_items = 0;    // work items per launch (threads the space runs at once)
  double seconds = 0;     // of the timed launch that reached it
};

// Best of a few timed launches per chain count after a warm-up; sized to take about target_ms
// per launch (a few tens of ms in all).
FmaPeak measure_fma_peak(double target_ms = 5.0);

}  // namespace kformer
