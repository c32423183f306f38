// The ceilings (see ceiling.hpp).
#include "measure/ceiling.hpp"

#include <Kokkos_Timer.hpp>

#include <algorithm>

#include "convert.hpp"
#include "counter_rng.hpp"
#include "gemm.hpp"
#include "platform/device.hpp"

namespace kformer {

namespace {

// TFLOP/s of y = a b^T (fp32 y) for each implementation, a and b of element type T.
template <class T>
GemmCeiling time_gemms(const DV<T**>& a, const DV<T**>& b) {
  const int M = static_cast<int>(a.extent(0)), K = static_cast<int>(a.extent(1));
  const int N = static_cast<int>(b.extent(0));
  Exec exec;
  DV<float**> c("ceiling_c", M, N);
  const auto rate = [&](kernels::GemmImpl impl) {
    double best = 1e30;
    for (int rep = 0; rep < 6; ++rep) {  // the first is the warm-up
      exec.fence();
      Kokkos::Timer t;
      kernels::matmul_forward(exec, impl, c, a, b);
      exec.fence();
      if (rep > 0) best = std::min(best, t.seconds());
    }
    return 2.0 * M * N * K / best / 1e12;
  };
  GemmCeiling g;
  g.native_tflops = rate(kernels::GemmImpl::native);
  if (kernels::gemm_vendor_available<Exec>()) g.vendor_tflops = rate(kernels::GemmImpl::vendor);
  const bool vendor = g.vendor_tflops > g.native_tflops;
  g.tflops = vendor ? g.vendor_tflops : g.native_tflops;
  g.impl = kernels::to_string(vendor ? kernels::GemmImpl::vendor : kernels::GemmImpl::native);
  return g;
}

}  // namespace

GemmCeiling measure_gemm_ceiling(const BlockDims& d, Precision precision) {
  const bool bf16 = precision == Precision::bf16;
  const int M = d.N(), K = d.C, N = d.mlp_in_width();
  DV<float**> a("ceiling_a", M, K), b("ceiling_b", N, K);
  Exec exec;
  kernels::fill_normal_block(exec, a, 1, K, 0, 0, 1.0f);  // real numbers: zeros can run faster
  kernels::fill_normal_block(exec, b, 2, K, 0, 0, 1.0f);
  GemmCeiling g;
  if (bf16) {
    DV<kernels::bf16**> a16("ceiling_a16", M, K), b16("ceiling_b16", N, K);
    kernels::convert(exec, a16, a);
    kernels::convert(exec, b16, b);
    g = time_gemms(a16, b16);
  } else {
    g = time_gemms(a, b);
  }
  g.precision = precision;
  g.shape = std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
  g.fma = measure_fma_peak();
  return g;
}

}  // namespace kformer
