// The ceilings MFU is judged against, measured at start-up on the run's own backend:
// - the best GEMM the program has: the native GEMM and the vendor sgemm (where a vendor library
//   is built) each timed at a layer's shape, (N = B*T tokens) x (C) x (the rank's MLP width),
//   best of a few runs after a warm-up; the faster of the two is the ceiling (where kformer's
//   native GEMM beats OpenBLAS, the vendor's rate is not what the machine can do);
// - the fp32 FMA peak of the execution space (fma_peak.hpp), the arithmetic bound of both.
#pragma once

#include <string>

#include "block.hpp"
#include "fma_peak.hpp"

namespace kformer {

struct GemmCeiling {
  double tflops = 0;                          // the best GEMM: max(native, vendor)
  std::string impl, shape;                    // the faster one, "native" or "vendor"; "2048x768x3072"
  double native_tflops = 0, vendor_tflops = 0;  // 0: not built
  FmaPeak fma;
};

GemmCeiling measure_gemm_ceiling(const BlockDims& d);

}  // namespace kformer
