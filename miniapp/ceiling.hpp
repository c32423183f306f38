// The GEMM ceiling that MFU is judged against: the vendor sgemm (native where no vendor library
// is built) timed at start-up on the run's own backend at a layer's shape, (N = B*T tokens) x
// (C) x (the rank's MLP width), best of a few runs after a warm-up.
#pragma once

#include "block.hpp"

namespace kformer {

struct GemmCeiling {
  double tflops = 0;
  std::string impl, shape;  // "vendor", "2048x768x3072"
};

GemmCeiling measure_gemm_ceiling(const BlockDims& d);

}  // namespace kformer
