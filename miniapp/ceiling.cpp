// The ceilings (see ceiling.hpp).
#include "ceiling.hpp"

#include <Kokkos_Timer.hpp>

#include <algorithm>

#include "counter_rng.hpp"

namespace kformer {

GemmCeiling measure_gemm_ceiling(const BlockDims& d) {
  const int M = d.N(), K = d.C, N = d.mlp_in_width();
  DV<float**> a("ceiling_a", M, K), b("ceiling_b", N, K), c("ceiling_c", M, N);
  Exec exec;
  kernels::fill_normal_block(exec, a, 1, K, 0, 0, 1.0f);  // real numbers: zeros can run faster
  kernels::fill_normal_block(exec, b, 2, K, 0, 0, 1.0f);
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
  g.shape = std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
  g.native_tflops = rate(kernels::GemmImpl::native);
  if (kernels::gemm_vendor_available<Exec>()) g.vendor_tflops = rate(kernels::GemmImpl::vendor);
  const bool vendor = g.vendor_tflops > g.native_tflops;
  g.tflops = vendor ? g.vendor_tflops : g.native_tflops;
  g.impl = kernels::to_string(vendor ? kernels::GemmImpl::vendor : kernels::GemmImpl::native);
  g.fma = measure_fma_peak();
  return g;
}

}  // namespace kformer
