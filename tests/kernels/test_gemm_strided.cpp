// The strided batch of GEMMs behind the batched attention (StridedGemm: oneDNN's batched bf16
// matmul or a CBLAS call a matrix on the host, cublasGemmStridedBatchedEx under CUDA): fp32 and
// bf16 operands, fp32 and bf16 C, every transposition, padded leading dimensions and gaps
// between the matrices, alpha and beta, against a float64 reference per matrix: within the
// bound of fp32 accumulation, plus one bf16 rounding for a bf16 C. beta = 0 must not read C
// (poisoned with NaN), and the gaps between the matrices must be left as they were. On the host
// also without oneDNN, the path of a CPU without AVX-512 or a build without it.
#include <cmath>
#include <string>

#include "attention_batched.hpp"
#include "kernel_test_util.hpp"
#include "reference_gemm.hpp"

namespace {

using namespace kformer::kernels;
using kformer::kernels::bf16;
using ktest::Exec;
using Vec = std::vector<double>;
using detail::BlasType;

constexpr int kCount = 3;

// Matrix i of a batch stored as rows x cols with leading dimension ld, stride elements apart.
Vec matrix(const Vec& all, long long stride, int i, int rows, int cols, int ld) {
  Vec m(std::size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m[std::size_t(r) * cols + c] = all[std::size_t(i * stride + (long long)r * ld + c)];
  return m;
}

template <class AB, class C>
struct Batch {
  bool ta, tb;
  int M, N, K, lda, ldb, ldc;
  long long sa, sb, sc;
  ktest::View<AB*> a, b;
  ktest::View<C*> c;
  Vec ha, hb, hc;
  Batch(bool ta_, bool tb_, int M_, int N_, int K_, std::mt19937_64& rng)
      : ta(ta_), tb(tb_), M(M_), N(N_), K(K_), lda((ta ? M : K) + 3), ldb((tb ? K : N) + 5), ldc(N + 2),
        sa((long long)(ta ? K : M) * lda + 7), sb((long long)(tb ? N : K) * ldb + 1), sc((long long)M * ldc + 4),
        a("a", kCount * sa), b("b", kCount * sb), c("c", kCount * sc) {
    ha = ktest::fill_random(a, rng), hb = ktest::fill_random(b, rng), hc = ktest::fill_random(c, rng);
  }
  void run(float alpha, float beta) {
    detail::StridedGemm g;
    g.trans_a = ta, g.trans_b = tb, g.M = M, g.N = N, g.K = K, g.alpha = alpha, g.beta = beta;
    g.ab = detail::blas_type<AB>, g.c = detail::blas_type<C>;
    g.a = a.data(), g.b = b.data(), g.cp = c.data(), g.lda = lda, g.ldb = ldb, g.ldc = ldc;
    g.stride_a = sa, g.stride_b = sb, g.stride_c = sc, g.count = kCount;
    detail::run_strided(Exec(), g);
    Kokkos::fence();
  }
  // Elements of the result outside the bound (fp32 accumulation; one bf16 rounding more for a
  // bf16 C), or gaps that changed; first names the first one.
  std::size_t check(double alpha, double beta, const Vec& c0, std::string& first) const {
    const Vec got = ktest::to_host(c);
    const bool c16 = detail::blas_type<C> == BlasType::bf16;
    std::size_t bad = 0;
    std::vector<bool> inside(got.size(), false);
    for (int i = 0; i < kCount; ++i) {
      const Vec ai = matrix(ha, sa, i, ta ? K : M, ta ? M : K, lda);
      const Vec bi = matrix(hb, sb, i, tb ? N : K, tb ? K : N, ldb);
      const Vec ci = matrix(c0, sc, i, M, N, ldc);
      const Vec ref = ktest::gemm_ref::ref_gemm(ta, tb, M, N, K, alpha, ai, bi, beta, ci);
      const Vec scale = ktest::gemm_ref::ref_gemm(ta, tb, M, N, K, std::fabs(alpha), ktest::gemm_ref::abs_of(ai),
                                                  ktest::gemm_ref::abs_of(bi), std::fabs(beta),
                                                  ktest::gemm_ref::abs_of(ci));
      for (int r = 0; r < M; ++r)
        for (int n = 0; n < N; ++n) {
          const std::size_t at = std::size_t(i * sc + (long long)r * ldc + n), e = std::size_t(r) * N + n;
          inside[at] = true;
          double bound = (K + 4) * std::ldexp(scale[e], -24);
          if (c16) bound += std::ldexp(std::fabs(ref[e]) + bound, -8);
          if (!(std::fabs(got[at] - ref[e]) <= bound) && bad++ == 0)
            first = "matrix " + std::to_string(i) + " (" + std::to_string(r) + "," + std::to_string(n) + "): got " +
                    std::to_string(got[at]) + ", reference " + std::to_string(ref[e]) + ", bound " +
                    std::to_string(bound);
        }
    }
    for (std::size_t at = 0; at < got.size(); ++at)
      if (!inside[at] && !(got[at] == hc[at]) && bad++ == 0) first = "gap element " + std::to_string(at) + " written";
    return bad;
  }
};

template <class AB, class C>
void all_cases(const std::string& path) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const std::string what = path + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
      Batch<AB, C> x(ta, tb, 37, 45, 70, rng);
      std::string first;
      x.run(0.5f, 2.0f);
      EXPECT_EQ(x.check(0.5, 2.0, x.hc, first), 0u) << what << " alpha 0.5 beta 2: " << first;
      // beta = 0 must not read C: its matrices poisoned, the gaps kept
      {
        auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x.c);
        for (int i = 0; i < kCount; ++i)
          for (int r = 0; r < x.M; ++r)
            for (int n = 0; n < x.N; ++n) h.data()[i * x.sc + (long long)r * x.ldc + n] = C(std::nanf(""));
        Kokkos::deep_copy(x.c, h);
      }
      x.run(0.125f, 0.0f);
      EXPECT_EQ(x.check(0.125, 0.0, x.hc, first), 0u) << what << " alpha 0.125 beta 0: " << first;
    }
}

template <class AB, class C>
void on_every_path(const char* types) {
  if (!gemm_vendor_available<Exec>()) GTEST_SKIP() << "no vendor BLAS for " << Exec::name() << " in this build";
  all_cases<AB, C>(std::string(types) + ", " + Exec::name());
  if constexpr (runs_on_host<Exec>) {
    if (detail::blas_type<AB> != BlasType::bf16) return;
    ::testing::Test::RecordProperty("bf16_library", detail::host_gemm_bf16_library());
    if (detail::host_gemm_writes_bf16())  // oneDNN's bf16 matmul runs here: the batch took it, not CBLAS
      EXPECT_STREQ(detail::host_gemm_bf16_library(), "oneDNN matmul (bf16)");
    detail::host_gemm_bf16_try_dnnl() = false;  // the CBLAS path a matrix, as without oneDNN
    all_cases<AB, C>(std::string(types) + ", without oneDNN");
    detail::host_gemm_bf16_try_dnnl() = true;
  }
}

TEST(GemmStrided, Fp32OperandsFp32C) { on_every_path<float, float>("fp32 A B, fp32 C"); }
TEST(GemmStrided, Bf16OperandsFp32C) { on_every_path<bf16, float>("bf16 A B, fp32 C"); }
TEST(GemmStrided, Bf16OperandsBf16C) { on_every_path<bf16, bf16>("bf16 A B, bf16 C"); }

}  // namespace
