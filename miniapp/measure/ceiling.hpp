// The ceilings MFU is judged against, measured at start-up on the run's own backend:
// - the best GEMM the program has: the native GEMM and the vendor sgemm (where a vendor library
//   is built) each timed at a layer's shape, (N = B*T tokens) x (C) x (the rank's MLP width),
//   best of a few runs after a warm-up; the faster of the two is the ceiling (where kformer's
//   native GEMM beats OpenBLAS, the vendor's rate is not what the machine can do). In the run's
//   precision: bf16 runs time the bf16 GEMMs (bf16 inputs, fp32 output) their layers call, so
//   that MFU is against what the machine does in bf16 (twice fp32 with AVX512-BF16);
// - the fp32 FMA peak of the execution space (fma_peak.hpp), the arithmetic bound of both.
#pragma once

#include <string>

#include "measure/fma_peak.hpp"
#include "model/block_dims.hpp"
#include "settings/choices.hpp"

namespace kformer {

struct GemmCeiling {
  double tflops = 0;                          // the best GEMM: max(native, vendor)
  std::string impl, shape;                    // the faster one, "native" or "vendor"; "2048x768x3072"
  Precision precision = Precision::fp32;     // of the timed GEMMs
  double native_tflops = 0, vendor_tflops = 0;  // 0: not built
  FmaPeak fma;
};

GemmCeiling measure_gemm_ceiling(const BlockDims& d, Precision precision = Precision::fp32);

}  // namespace kformer
