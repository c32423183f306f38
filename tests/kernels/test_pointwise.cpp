// GELU, SwiGLU, residual add, RoPE and the causal softmax against the float64 reference (forward
// and backward), the reference backwards against finite differences, and bitwise determinism of
// the backwards; the kernels whose work shape differs on a GPU in both shapes (work_shape.hpp).
#include "activations.hpp"
#include "finite_diff.hpp"
#include "kernel_test_util.hpp"
#include "reference_pointwise.hpp"
#include "residual.hpp"
#include "rope.hpp"
#include "softmax.hpp"

namespace {

using ktest::Exec;
using ktest::View;
using ktest::ref::Vec;
namespace kk = kformer::kernels;

// A random row count and width that are not multiples of any vector width (and sometimes 1).
std::pair<int, int> random_shape(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> n(1, 37), c(1, 95);
  return {n(rng), c(rng)};
}

Vec map(const Vec& x, double (*f)(double)) {
  Vec y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

TEST(Gelu, MatchesReferenceAndIsDeterministic) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (int rep = 0; rep < 3; ++rep) {
    // The first: a size no thread's lanes divide (work_shape.hpp), so the tail is always tested.
    const auto [N, C] = rep == 0 ? std::pair<int, int>{7, 13} : random_shape(rng);
    View<float**> x("x", N, C), y("y", N, C), dy("dy", N, C), dx("dx", N, C);
    const Vec hx = ktest::fill_random(x, rng, -4, 4), hdy = ktest::fill_random(dy, rng);
    ktest::for_each_shape([&](auto shape) {
      constexpr kk::Shape S = decltype(shape)::value;
      ktest::poison(y);
      kk::gelu_forward<S>(Exec(), y, x);
      EXPECT_LT(ktest::rel_err(ktest::to_host(y), map(hx, ktest::ref::gelu)), 1e-5);
      ktest::poison(dx);
      kk::gelu_backward<S>(Exec(), dx, x, dy);
      Vec ref = map(hx, ktest::ref::gelu_grad);
      for (std::size_t i = 0; i < ref.size(); ++i) ref[i] *= hdy[i];
      const Vec got = ktest::to_host(dx);
      EXPECT_LT(ktest::rel_err(got, ref), 1e-5);
      kk::gelu_backward<S>(Exec(), dx, x, dy);
      ktest::expect_bitwise_equal(got, ktest::to_host(dx), "gelu dx");
    });
  }
}

TEST(Gelu, ReferenceGradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(ktest::fresh_seed());
  std::uniform_real_distribution<double> u(-4, 4);
  Vec x(50), w(50, 1.0);
  for (double& e : x) e = u(rng);
  EXPECT_LT(ktest::rel_err(map(x, ktest::ref::gelu_grad),
                           ktest::numeric_grad([](const Vec& v) { return map(v, ktest::ref::gelu); }, x, w)),
            1e-7);
}

TEST(SwiGLU, MatchesReferenceAndIsDeterministic) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (int rep = 0; rep < 3; ++rep) {
    const auto nf = random_shape(rng);
    const int N = nf.first, F = nf.second;  // not a structured binding: the lambda captures these
    View<float**> x("x", N, 2 * F), y("y", N, F), dy("dy", N, F), dx("dx", N, 2 * F);
    const Vec hx = ktest::fill_random(x, rng, -4, 4), hdy = ktest::fill_random(dy, rng);
    ktest::for_each_shape([&](auto shape) {
      constexpr kk::Shape S = decltype(shape)::value;
      ktest::poison(y);
      kk::swiglu_forward<S>(Exec(), y, x);
      EXPECT_LT(ktest::rel_err(ktest::to_host(y), ktest::ref::swiglu_forward(hx, N, F)), 1e-5);
      ktest::poison(dx);
      kk::swiglu_backward<S>(Exec(), dx, x, dy);
      const Vec got = ktest::to_host(dx);
      EXPECT_LT(ktest::rel_err(got, ktest::ref::swiglu_backward(hx, hdy, N, F)), 1e-5);
      kk::swiglu_backward<S>(Exec(), dx, x, dy);
      ktest::expect_bitwise_equal(got, ktest::to_host(dx), "swiglu dinp");
    });
  }
}

TEST(SwiGLU, ReferenceGradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(ktest::fresh_seed());
  std::uniform_real_distribution<double> u(-3, 3);
  const int N = 3, F = 5;
  Vec x(N * 2 * F), w(N * F);
  for (auto* v : {&x, &w})
    for (double& e : *v) e = u(rng);
  const auto f = [&](const Vec& v) { return ktest::ref::swiglu_forward(v, N, F); };
  EXPECT_LT(ktest::rel_err(ktest::ref::swiglu_backward(x, w, N, F), ktest::numeric_grad(f, x, w)), 1e-7);
}

TEST(Residual, ForwardAddsAndBackwardCopies) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const auto [N, C] : {std::pair<int, int>{7, 13}, random_shape(rng)}) {
    View<float**> a("a", N, C), b("b", N, C), y("y", N, C), da("da", N, C), db("db", N, C);
    const Vec ha = ktest::fill_random(a, rng), hb = ktest::fill_random(b, rng);
    Vec sum(ha.size());
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = ha[i] + hb[i];
    ktest::for_each_shape([&](auto shape) {
      constexpr kk::Shape S = decltype(shape)::value;
      ktest::poison(y);
      kk::residual_forward<S>(Exec(), y, a, b);
      EXPECT_LT(ktest::rel_err(ktest::to_host(y), sum), 1e-7);
      ktest::poison(da);
      ktest::poison(db);
      kk::residual_backward<S>(Exec(), da, db, y);
      ktest::expect_bitwise_equal(ktest::to_host(da), ktest::to_host(y), "residual da");
      ktest::expect_bitwise_equal(ktest::to_host(db), ktest::to_host(y), "residual db");
    });
  }
}

// RoPE on a packed qkv-like buffer: the first nrot heads rotated, the rest copied.
TEST(RoPE, MatchesReferenceAndIsDeterministic) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int hds[] = {2, 12, 20, 64};
  for (int hd : hds) {
    // rotated heads up to 9: the GPU shape takes them 4 at a time (a partial last group)
    std::uniform_int_distribution<int> bt(1, 9), rot(1, 9), heads(1, 4), off(0, 3000);
    const int B = bt(rng), T = bt(rng), nrot = rot(rng), W = (nrot + heads(rng)) * hd, pos0 = off(rng);
    SCOPED_TRACE("hd=" + std::to_string(hd) + " pos0=" + std::to_string(pos0));
    View<float***> x("x", B, T, W), y("y", B, T, W), dy("dy", B, T, W), dx("dx", B, T, W);
    const Vec hx = ktest::fill_random(x, rng), hdy = ktest::fill_random(dy, rng);
    ktest::for_each_shape([&](auto shape) {
      constexpr kk::Shape S = decltype(shape)::value;
      ktest::poison(y);
      kk::rope_forward<S>(Exec(), y, x, nrot, hd, pos0);
      EXPECT_LT(ktest::rel_err(ktest::to_host(y), ktest::ref::rope(hx, B, T, W, nrot, hd, pos0, 1e4, 1)), 1e-6);
      ktest::poison(dx);
      kk::rope_backward<S>(Exec(), dx, dy, nrot, hd, pos0);
      const Vec got = ktest::to_host(dx);
      EXPECT_LT(ktest::rel_err(got, ktest::ref::rope(hdy, B, T, W, nrot, hd, pos0, 1e4, -1)), 1e-6);
      kk::rope_backward<S>(Exec(), dx, dy, nrot, hd, pos0);
      ktest::expect_bitwise_equal(got, ktest::to_host(dx), "rope dx");
      View<float***> z("z", B, T, W);
      Kokkos::deep_copy(z, x);
      kk::rope_forward<S>(Exec(), z, z, nrot, hd, pos0);  // in place
      ktest::expect_bitwise_equal(ktest::to_host(z), ktest::to_host(y), "rope in place");
    });
  }
}

TEST(RoPE, ReferenceBackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(ktest::fresh_seed());
  std::uniform_real_distribution<double> u(-1, 1);
  const int B = 2, T = 3, hd = 6, nrot = 2, W = 3 * hd, pos0 = 5;
  Vec x(B * T * W), w(B * T * W);
  for (auto* v : {&x, &w})
    for (double& e : *v) e = u(rng);
  const auto f = [&](const Vec& v) { return ktest::ref::rope(v, B, T, W, nrot, hd, pos0, 1e4, 1); };
  EXPECT_LT(ktest::rel_err(ktest::ref::rope(w, B, T, W, nrot, hd, pos0, 1e4, -1), ktest::numeric_grad(f, x, w)),
            1e-7);
}

// Causal softmax over (B,H,T,T) scores, forward in place and backward, against float64:
// p_j = exp(s_j - max) / sum_{k<=t} exp(s_k - max) for j <= t, 0 above the diagonal;
// ds_j = p_j (dp_j - sum_k p_k dp_k). Row lengths 1..T cover the tails of every lane width. The
// backward's error is taken against the size of the terms it subtracts, p_j (|dp_j| + |sum|):
// where dp_j is close to the row's mean the difference cancels, and against the difference
// itself a few short rows (T = 2) can show fp32's rounding of those terms as 3e-5.
TEST(CausalSoftmax, MatchesReferenceAndIsDeterministic) {
  std::mt19937_64 rng(ktest::fresh_seed());
  std::uniform_int_distribution<int> bh(1, 3), tt(1, 70);
  const int B = bh(rng), H = bh(rng), T = tt(rng);
  SCOPED_TRACE("B=" + std::to_string(B) + " H=" + std::to_string(H) + " T=" + std::to_string(T));
  View<float****> scores("scores", B, H, T, T), att("att", B, H, T, T), datt("datt", B, H, T, T), ds("ds", B, H, T, T);
  const Vec hs = ktest::fill_random(scores, rng, -6, 6), hdp = ktest::fill_random(datt, rng);
  Vec p(hs.size(), 0.0), dsr(hs.size(), 0.0), terms(hs.size(), 0.0);
  for (int r = 0; r < B * H * T; ++r) {
    const int t = r % T;
    const std::size_t o = std::size_t(r) * T;
    double m = hs[o];
    for (int j = 0; j <= t; ++j) m = std::max(m, hs[o + j]);
    double sum = 0, pd = 0;
    for (int j = 0; j <= t; ++j) sum += std::exp(hs[o + j] - m);
    for (int j = 0; j <= t; ++j) p[o + j] = std::exp(hs[o + j] - m) / sum, pd += p[o + j] * hdp[o + j];
    for (int j = 0; j <= t; ++j) dsr[o + j] = p[o + j] * (hdp[o + j] - pd), terms[o + j] = p[o + j] * (std::abs(hdp[o + j]) + std::abs(pd));
  }
  ktest::for_each_shape([&](auto shape) {
    constexpr kk::Shape S = decltype(shape)::value;
    Kokkos::deep_copy(att, scores);
    kk::causal_softmax_forward<S>(Exec(), att);
    const Vec got = ktest::to_host(att);
    EXPECT_LT(ktest::rel_err(got, p), 1e-5);
    ktest::poison(ds);
    kk::causal_softmax_backward<S>(Exec(), ds, View<const float****>(datt), att);
    const Vec dgot = ktest::to_host(ds);
    EXPECT_LT(ktest::err_against(dgot, dsr, terms), 1e-5);
    kk::causal_softmax_backward<S>(Exec(), ds, View<const float****>(datt), att);
    ktest::expect_bitwise_equal(dgot, ktest::to_host(ds), "softmax dscores");
  });
}

}  // namespace
