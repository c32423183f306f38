// LayerNorm and RMSNorm against the float64 reference (forward, backward), the reference
// backward against finite differences, and run-to-run bitwise determinism of the backward; each
// in the host and the GPU work shape (kernels/work_shape.hpp); and the lane grouping of the one-thread
// row reductions beneath them.
#include "finite_diff.hpp"
#include "kernel_test_util.hpp"
#include "layernorm.hpp"
#include "reference_pointwise.hpp"
#include "rmsnorm.hpp"
#include "team_reduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

using ktest::View;
namespace kk = kformer::kernels;

constexpr double kEps = 1e-5;

// One shape's device buffers and the host copies of its inputs; `centered` picks LayerNorm.
struct NormRun {
  int N, C;
  bool centered;
  View<float**> x, out, dout, dx;
  View<float*> w, b, mean, rstd, dw, db;
  std::vector<double> hx, hw, hb, hdy;

  NormRun(int n, int c, bool cent, std::mt19937_64& rng)
      : N(n), C(c), centered(cent), x("x", n, c), out("out", n, c), dout("dout", n, c), dx("dx", n, c),
        w("w", c), b("b", c), mean("mean", n), rstd("rstd", n), dw("dw", c), db("db", c) {
    hx = ktest::fill_random(x, rng, -2.0, 3.0);
    hw = ktest::fill_random(w, rng, 0.5, 1.5);
    hb = ktest::fill_random(b, rng);
    hdy = ktest::fill_random(dout, rng);
    if (!centered) hb.clear();
  }
  template <kk::Shape S = kk::Shape::natural>
  void forward() {
    ktest::poison(out);
    ktest::poison(mean);
    ktest::poison(rstd);
    if (centered)
      kk::layernorm_forward<S>(ktest::Exec(), out, mean, rstd, x, w, b, float(kEps));
    else
      kk::rmsnorm_forward<S>(ktest::Exec(), out, rstd, x, w, float(kEps));
    Kokkos::fence();
  }
  template <kk::Shape S = kk::Shape::natural>
  void backward(bool zero_param_grads = true) {
    ktest::poison(dx);
    if (zero_param_grads) {  // they accumulate (+=) like every parameter gradient
      Kokkos::deep_copy(dw, 0.f);
      Kokkos::deep_copy(db, 0.f);
    }
    if (centered)
      kk::layernorm_backward<S>(ktest::Exec(), dx, dw, db, dout, x, w, mean, rstd);
    else
      kk::rmsnorm_backward<S>(ktest::Exec(), dx, dw, dout, x, w, rstd);
    Kokkos::fence();
  }
};

// Shapes: tiny, not multiples of the 8-wide chunks, one row, and two random ones; on the host the
// GPU shape keeps rows of C <= 32 in registers and walks wider ones, those of 16, 24 and 32
// channels in 8-channel runs of 16-byte words (norm_registers.hpp), one of them part-filled. C >= 3: with
// one or two channels the normalised row is +-1 and dx is zero up to rounding (no relative error).
std::vector<std::pair<int, int>> shapes(std::mt19937_64& rng) {
  std::vector<std::pair<int, int>> s = {{1, 3}, {1, 7}, {3, 8}, {5, 13}, {6, 16}, {9, 24}, {4, 32}, {17, 64}, {33, 203}};
  std::uniform_int_distribution<int> n(1, 40), c(3, 300);
  for (int i = 0; i < 2; ++i) s.emplace_back(n(rng), c(rng));
  return s;
}

// dx's error against the scale of the terms it is a difference of, ||rstd * dy * w||. With few
// channels dx can cancel far below them (LayerNorm with C = 3 drew norm-wise relative errors of
// 1e-5 to 6e-4 in about one run in 75), which is the conditioning of the function, not an error of
// the kernel; with many channels the two measures agree.
double dx_err(const std::vector<double>& got, const std::vector<double>& ref, const NormRun& r,
              const std::vector<double>& rstd) {
  double e = 0, s = 0;
  for (int n = 0; n < r.N; ++n)
    for (int c = 0; c < r.C; ++c) {
      const std::size_t i = std::size_t(n) * r.C + c;
      const double t = rstd[n] * r.hdy[i] * r.hw[c];
      e += (got[i] - ref[i]) * (got[i] - ref[i]);
      s += t * t;
    }
  return std::sqrt(e / s);
}

// The mean's error against the scale of what it averages, each row's root mean square: a row of
// few channels can average to far below its values (N=1, C=3 drew a relative error of 1.009e-5 in
// about one run in 2000), the conditioning of the sum, not an error of the kernel.
double mean_err(const std::vector<double>& got, const std::vector<double>& ref, const NormRun& r) {
  double e = 0, s = 0;
  for (int n = 0; n < r.N; ++n) {
    double sq = 0;
    for (int c = 0; c < r.C; ++c) sq += r.hx[std::size_t(n) * r.C + c] * r.hx[std::size_t(n) * r.C + c];
    e += (got[n] - ref[n]) * (got[n] - ref[n]);
    s += sq / r.C;
  }
  return std::sqrt(e / s);
}

void check_against_reference(bool centered) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const auto& nc : shapes(rng)) {
    const int N = nc.first, C = nc.second;  // not a structured binding: lambdas capture these
    SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
    NormRun r(N, C, centered, rng);
    ktest::for_each_shape([&](auto shape) {
      constexpr kk::Shape S = decltype(shape)::value;
      r.forward<S>();
      const auto f = ktest::ref::norm_forward(r.hx, r.hw, r.hb, N, C, kEps, centered);
      EXPECT_LT(ktest::rel_err(ktest::to_host(r.out), f.out), 1e-5);
      EXPECT_LT(ktest::rel_err(ktest::to_host(r.rstd), f.rstd), 1e-5);
      if (centered) EXPECT_LT(mean_err(ktest::to_host(r.mean), f.mean, r), 1e-5);
      r.backward<S>();
      std::vector<double> dx, dw, db;
      ktest::ref::norm_backward(r.hdy, r.hx, r.hw, N, C, kEps, centered, dx, dw, db);
      EXPECT_LT(dx_err(ktest::to_host(r.dx), dx, r, f.rstd), 1e-5);
      EXPECT_LT(ktest::rel_err(ktest::to_host(r.dw), dw), 1e-5);
      if (centered) EXPECT_LT(ktest::rel_err(ktest::to_host(r.db), db), 1e-5);
      r.backward<S>(false);  // a second micro-batch adds the same gradient again
      for (auto& v : dw) v *= 2;
      for (auto& v : db) v *= 2;
      EXPECT_LT(ktest::rel_err(ktest::to_host(r.dw), dw), 1e-5) << "dweight must accumulate";
      if (centered) EXPECT_LT(ktest::rel_err(ktest::to_host(r.db), db), 1e-5) << "dbias must accumulate";
    });
  }
}

void check_reference_gradients(bool centered) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int N = 3, C = 7;
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(N * C), w(C), b(centered ? C : 0), dy(N * C);
  for (auto* v : {&x, &w, &b, &dy})
    for (double& e : *v) e = u(rng);
  std::vector<double> dx, dw, db;
  ktest::ref::norm_backward(dy, x, w, N, C, kEps, centered, dx, dw, db);
  using ktest::ref::norm_forward;
  EXPECT_LT(ktest::rel_err(dx, ktest::numeric_grad([&](const auto& v) { return norm_forward(v, w, b, N, C, kEps, centered).out; }, x, dy)), 1e-6);
  EXPECT_LT(ktest::rel_err(dw, ktest::numeric_grad([&](const auto& v) { return norm_forward(x, v, b, N, C, kEps, centered).out; }, w, dy)), 1e-6);
  if (centered)
    EXPECT_LT(ktest::rel_err(db, ktest::numeric_grad([&](const auto& v) { return norm_forward(x, w, v, N, C, kEps, centered).out; }, b, dy)), 1e-6);
}

// Three widths: the GPU shape holds a row of 30 channels in registers on the host too (a team of
// one thread there), one of 32 in runs of 8, and one of 301 it walks (norm_registers.hpp).
void check_deterministic(bool centered) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const int C : {30, 32, 301}) {
    SCOPED_TRACE("C=" + std::to_string(C));
    NormRun r(257, C, centered, rng);
    ktest::for_each_shape([&](auto shape) {
      constexpr kk::Shape S = decltype(shape)::value;
      r.forward<S>();
      r.backward<S>();
      const auto dx = ktest::to_host(r.dx), dw = ktest::to_host(r.dw), db = ktest::to_host(r.db);
      r.backward<S>();
      ktest::expect_bitwise_equal(dx, ktest::to_host(r.dx), "dx");
      ktest::expect_bitwise_equal(dw, ktest::to_host(r.dw), "dweight");
      if (centered) ktest::expect_bitwise_equal(db, ktest::to_host(r.db), "dbias");
    });
  }
}

TEST(LayerNorm, MatchesReference) { check_against_reference(true); }
TEST(LayerNorm, ReferenceBackwardMatchesFiniteDifferences) { check_reference_gradients(true); }
TEST(LayerNorm, BackwardIsBitwiseDeterministic) { check_deterministic(true); }
TEST(RMSNorm, MatchesReference) { check_against_reference(false); }
TEST(RMSNorm, ReferenceBackwardMatchesFiniteDifferences) { check_reference_gradients(false); }
TEST(RMSNorm, BackwardIsBitwiseDeterministic) { check_deterministic(false); }

// x[c] for the reductions, callable where they are called (host and device): a host lambda there
// is a host-only function inside a host-device template, which nvcc warns of in a CUDA build.
struct ElementAt {
  const float* x;
  KOKKOS_INLINE_FUNCTION float operator()(int c) const { return x[c]; }
};

// The one-thread row reductions under the norms, softmaxes and cross-entropy (team_reduce.hpp)
// keep their stated grouping, whatever form the compiler is given: lane l adds (or takes the max
// of) the terms c = l mod 16 in order, the lanes then meet in a fixed tree. Written out here in
// scalars, bit for bit; terms of mixed magnitude, so that another grouping gives other bits.
TEST(LaneReductions, FollowTheirStatedGrouping) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> mant(-1.f, 1.f);
  std::uniform_int_distribution<int> expo(-12, 12);
  int sums_unlike_in_order = 0;
  for (const int n : {1, 15, 16, 17, 31, 100, 777, 50304}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> x(n);
    for (float& v : x) v = std::ldexp(mant(rng), expo(rng));
    float lane_sum[16] = {}, lane_max[16];
    for (float& m : lane_max) m = x[0];
    for (int c = 0; c < n; ++c) {
      lane_sum[c % 16] += x[c];
      lane_max[c % 16] = x[c] > lane_max[c % 16] ? x[c] : lane_max[c % 16];
    }
    for (int w = 8; w > 0; w /= 2)
      for (int l = 0; l < w; ++l) {
        lane_sum[l] += lane_sum[l + w];
        lane_max[l] = lane_max[l + w] > lane_max[l] ? lane_max[l + w] : lane_max[l];
      }
    const ElementAt at{x.data()};
    const float sum = kk::detail::sum_by_lanes(n, at), max = kk::detail::max_by_lanes(n, at);
    EXPECT_EQ(std::memcmp(&sum, &lane_sum[0], sizeof sum), 0) << sum << " against " << lane_sum[0];
    EXPECT_EQ(max, lane_max[0]);
    EXPECT_EQ(max, *std::max_element(x.begin(), x.end()));
    float in_order = 0.f;
    for (const float v : x) in_order += v;
    sums_unlike_in_order += in_order != sum;
  }
  EXPECT_GT(sums_unlike_in_order, 0) << "the terms do not tell one grouping from another";
}

}  // namespace
