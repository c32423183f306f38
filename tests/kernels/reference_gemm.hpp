// Shared by the GEMM tests: the float64 reference GEMM and the error measures the tolerances are
// stated in (a norm-wise error scaled by the sum of absolute terms, and the elementwise bound of
// fp32 accumulation for bf16 operands), and a widening copy of a bf16 matrix.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "bf16.hpp"
#include "kernel_test_util.hpp"

namespace ktest::gemm_ref {

using Vec = std::vector<double>;

// C(M,N) = alpha op(A) op(B) + beta C + bias, float64, row-major.
inline Vec ref_gemm(bool ta, bool tb, int M, int N, int K, double alpha, const Vec& a, const Vec& b, double beta, Vec c,
                    const Vec& bias = {}) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += (ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
      c[i * N + j] = alpha * s + (beta == 0 ? 0.0 : beta * c[i * N + j]) + (bias.empty() ? 0.0 : bias[j]);
    }
  return c;
}

inline Vec abs_of(Vec v) {
  for (auto& e : v) e = std::fabs(e);
  return v;
}
// ||got - ref|| / ||scale||, scale being the same sums over absolute values: with beta C and a bias
// added, a small matrix's entries can cancel far below their terms (1x1x1 failed a plain relative
// error now and then), which is the conditioning of the sum, not an error of the GEMM. An fp32 sum
// of K terms is within (K + 1) 2^-24 of scale per element, whatever the signs and the order.
inline double scaled_err(const Vec& got, const Vec& ref, const Vec& scale) {
  if (got.size() != ref.size() || ref.size() != scale.size()) return INFINITY;
  double e = 0, s = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    e += (got[i] - ref[i]) * (got[i] - ref[i]);
    s += scale[i] * scale[i];
  }
  return s > 0 ? std::sqrt(e / s) : std::sqrt(e);
}
inline double scaled_err(const Vec& got, bool ta, bool tb, int M, int N, int K, double alpha, const Vec& a,
                         const Vec& b, double beta, const Vec& c, const Vec& bias) {
  return scaled_err(got, ref_gemm(ta, tb, M, N, K, alpha, a, b, beta, c, bias),
                    ref_gemm(ta, tb, M, N, K, std::fabs(alpha), abs_of(a), abs_of(b), std::fabs(beta), abs_of(c),
                             abs_of(bias)));
}

// Elements of got outside the error bound of fp32 accumulation: products of bf16 values are
// exact in fp32, so only the K - 1 additions, alpha, beta C and the bias round, each by at most
// 2^-24 of the running sum of absolute values: |got - ref| <= (K + 4) 2^-24 scale, where scale
// is the same expression over absolute values. A bf16 accumulator (2^-8) fails it by far.
inline std::size_t beyond_fp32_bound(const Vec& got, bool ta, bool tb, int M, int N, int K, double alpha, const Vec& a,
                                     const Vec& b, double beta, const Vec& c, const Vec& bias, std::string& first) {
  const Vec ref = ref_gemm(ta, tb, M, N, K, alpha, a, b, beta, c, bias);
  const Vec scale =
      ref_gemm(ta, tb, M, N, K, std::fabs(alpha), abs_of(a), abs_of(b), std::fabs(beta), abs_of(c), abs_of(bias));
  std::size_t n = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double bound = (K + 4) * std::ldexp(scale[i], -24);
    if (!(std::fabs(got[i] - ref[i]) <= bound) && n++ == 0)
      first = "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", reference " +
              std::to_string(ref[i]) + ", bound " + std::to_string(bound);
  }
  return n;
}

// x converted to fp32 on the device. Outside any test body: CUDA's device lambdas may not live in
// a private member function, and GoogleTest's TestBody is one.
inline ktest::View<float**> widened(const ktest::View<kformer::kernels::bf16**>& x) {
  ktest::View<float**> out("widened", x.extent(0), x.extent(1));
  Kokkos::parallel_for(
      "widen", Kokkos::RangePolicy<ktest::Exec>(0, x.span()),
      KOKKOS_LAMBDA(const int i) { out.data()[i] = x.data()[i]; });
  return out;
}

}  // namespace ktest::gemm_ref
