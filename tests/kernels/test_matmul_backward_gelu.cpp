// GPT's MLP backward through its GELU (kernels/gemm/matmul_backward_gelu.hpp), fp32 and bf16, each
// GEMM implementation: against a float64 reference (d_pre = (dy W) * gelu'(pre), FC2's weight and
// bias gradients added to their earlier values); where it runs unfused (the host; a GPU where
// cuBLASLt has no epilogue for the shape) bitwise matmul_backward then gelu_backward, FC1's bias
// gradient untouched (FC1's own backward adds it); where cuBLASLt's epilogue ran, FC1's bias
// gradient added against the reference, and both close to the unfused calls (bias_backward for FC1)
// on the same GPU (its GELU' is its own; in bf16 the bias gradient is rounded to bf16 first).
#include <cmath>

#include "finite_diff.hpp"
#include "kernel_test_util.hpp"
#include "matmul_backward_gelu.hpp"
#include "reference_gemm.hpp"
#include "reference_pointwise.hpp"

namespace {

using namespace kformer::kernels;
using kformer::kernels::bf16;
using ktest::Exec;
using Vec = std::vector<double>;
template <class T>
using View = ktest::View<T>;

struct Dims {
  int n, c, f;  // tokens, FC2's output (the model width), FC1's output (the GELU's width)
};
// f a multiple of 8 (what cuBLASLt's GELU epilogues take) and not.
const Dims kDims[] = {{97, 64, 136}, {33, 40, 24}, {5, 3, 7}, {130, 70, 130}};

template <class T>
struct Case {
  View<T**> dy, act, w, pre, d_pre;
  View<float**> d_act, dw;
  View<float*> db, db_pre;
  Vec hdy, hact, hw, hpre, hdw0, hdb0, hdbp0;
  Case(const Dims& d, std::mt19937_64& rng)
      : dy("dy", d.n, d.c), act("act", d.n, d.f), w("w", d.c, d.f), pre("pre", d.n, d.f), d_pre("d_pre", d.n, d.f),
        d_act("d_act", d.n, d.f), dw("dw", d.c, d.f), db("db", d.c), db_pre("db_pre", d.f) {
    hdy = ktest::fill_random(dy, rng), hact = ktest::fill_random(act, rng), hw = ktest::fill_random(w, rng);
    hpre = ktest::fill_random(pre, rng, -3, 3), hdw0 = ktest::fill_random(dw, rng), hdb0 = ktest::fill_random(db, rng);
    hdbp0 = ktest::fill_random(db_pre, rng);
    ktest::poison(d_pre), ktest::poison(d_act);
  }
  bool run(GemmImpl impl) {
    return matmul_backward_gelu(Exec(), impl, d_pre, db_pre, d_act, dw, db, View<const T**>(dy), View<const T**>(act),
                                View<const T**>(w), View<const T**>(pre));
  }
  // The unfused sequence into fresh gradients with the same starting values (call it before run()).
  Case unfused(GemmImpl impl) const {
    Case u = *this;
    u.d_pre = View<T**>("d_pre_u", d_pre.extent(0), d_pre.extent(1));
    u.d_act = View<float**>("d_act_u", d_act.extent(0), d_act.extent(1));
    u.dw = View<float**>("dw_u", dw.extent(0), dw.extent(1)), u.db = View<float*>("db_u", db.extent(0));
    u.db_pre = View<float*>("db_pre_u", db_pre.extent(0));
    Kokkos::deep_copy(u.dw, dw), Kokkos::deep_copy(u.db, db), Kokkos::deep_copy(u.db_pre, db_pre);
    matmul_backward(Exec(), impl, u.d_act, u.dw, u.db, View<const T**>(dy), View<const T**>(act), View<const T**>(w));
    gelu_backward(Exec(), u.d_pre, View<const T**>(pre), u.d_act);
    bias_backward(Exec(), u.db_pre, View<const T**>(u.d_pre));
    return u;
  }
};

template <class T>
void check(GemmImpl impl, std::mt19937_64& rng, int& fused_cases) {
  constexpr bool low = std::is_same<T, bf16>::value;
  for (const Dims& d : kDims) {
    SCOPED_TRACE(std::string(to_string(impl)) + (low ? " bf16 " : " fp32 ") + std::to_string(d.n) + "x" +
                 std::to_string(d.c) + "x" + std::to_string(d.f));
    Case<T> k(d, rng);
    const Case<T> u = k.unfused(impl);
    const bool fused = k.run(impl);
    fused_cases += fused ? 1 : 0;
    // The float64 reference from the same (T) inputs.
    const Vec dact = ktest::gemm_ref::ref_gemm(false, false, d.n, d.f, d.c, 1, k.hdy, k.hw, 0, Vec(d.n * d.f));
    Vec dpre(dact.size()), dbp = k.hdbp0;
    for (std::size_t i = 0; i < dact.size(); ++i) dpre[i] = dact[i] * ktest::ref::gelu_grad(k.hpre[i]);
    for (int i = 0; i < d.n; ++i)
      for (int j = 0; j < d.f; ++j) dbp[j] += dpre[i * d.f + j];
    const Vec dw = ktest::gemm_ref::ref_gemm(true, false, d.c, d.f, d.n, 1, k.hdy, k.hact, 1, k.hdw0);
    Vec db = k.hdb0;
    for (int i = 0; i < d.n; ++i)
      for (int j = 0; j < d.c; ++j) db[j] += k.hdy[i * d.c + j];
    EXPECT_LT(ktest::rel_err(ktest::to_host(k.d_pre), dpre), low ? 1e-2 : 1e-5);
    if (fused)  // else FC1's bias gradient is left to FC1's matmul_backward
      EXPECT_LT(ktest::rel_err(ktest::to_host(k.db_pre), dbp), low ? 1e-2 : 1e-5);
    else
      ktest::expect_bitwise_equal(ktest::to_host(k.db_pre), k.hdbp0, "FC1's bias gradient, left to FC1");
    EXPECT_LT(ktest::rel_err(ktest::to_host(k.dw), dw), 1e-5);
    EXPECT_LT(ktest::rel_err(ktest::to_host(k.db), db), 1e-5);
    if (!fused) {  // the same calls as the unfused sequence, so the same bits
      ktest::expect_bitwise_equal(ktest::to_host(k.d_pre), ktest::to_host(u.d_pre), "d_pre");
      ktest::expect_bitwise_equal(ktest::to_host(k.dw), ktest::to_host(u.dw), "dw");
      ktest::expect_bitwise_equal(ktest::to_host(k.db), ktest::to_host(u.db), "db");
    } else {  // cuBLASLt's GELU' and sums beside gelu_backward's and bias_backward's
      EXPECT_LT(ktest::rel_err(ktest::to_host(k.d_pre), ktest::to_host(u.d_pre)), low ? 1e-2 : 2e-3);
      EXPECT_LT(ktest::rel_err(ktest::to_host(k.db_pre), ktest::to_host(u.db_pre)), low ? 1e-2 : 2e-3);
      ktest::expect_bitwise_equal(ktest::to_host(k.dw), ktest::to_host(u.dw), "dw");
    }
  }
}

TEST(MatmulBackwardGelu, MatchesReferenceAndTheUnfusedCalls) {
  std::mt19937_64 rng(ktest::fresh_seed());
  std::vector<GemmImpl> impls{GemmImpl::native};
  if (gemm_vendor_available<Exec>()) impls.push_back(GemmImpl::vendor);
  int fused = 0;
  for (GemmImpl impl : impls) {
    check<float>(impl, rng, fused);
    check<bf16>(impl, rng, fused);
  }
  ::testing::Test::RecordProperty("cublaslt_fused_cases", fused);
  if (runs_on_host<Exec>) EXPECT_EQ(fused, 0) << "only cuBLASLt fuses this backward";
}

}  // namespace
