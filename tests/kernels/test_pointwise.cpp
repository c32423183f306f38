// GELU, SwiGLU, residual add and RoPE against the float64 reference (forward and backward),
// the reference backwards against finite differences, and bitwise determinism of the backwards.
#include "activations.hpp"
#include "finite_diff.hpp"
#include "kernel_test_util.hpp"
#include "reference_pointwise.hpp"
#include "residual.hpp"
#include "rope.hpp"

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
    const auto [N, C] = random_shape(rng);
    View<float**> x("x", N, C), y("y", N, C), dy("dy", N, C), dx("dx", N, C);
    const Vec hx = ktest::fill_random(x, rng, -4, 4), hdy = ktest::fill_random(dy, rng);
    ktest::poison(y);
    kk::gelu_forward(Exec(), y, x);
    EXPECT_LT(ktest::rel_err(ktest::to_host(y), map(hx, ktest::ref::gelu)), 1e-5);
    ktest::poison(dx);
    kk::gelu_backward(Exec(), dx, x, dy);
    Vec ref = map(hx, ktest::ref::gelu_grad);
    for (std::size_t i = 0; i < ref.size(); ++i) ref[i] *= hdy[i];
    const Vec got = ktest::to_host(dx);
    EXPECT_LT(ktest::rel_err(got, ref), 1e-5);
    kk::gelu_backward(Exec(), dx, x, dy);
    ktest::expect_bitwise_equal(got, ktest::to_host(dx), "gelu dx");
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
    const auto [N, F] = random_shape(rng);
    View<float**> x("x", N, 2 * F), y("y", N, F), dy("dy", N, F), dx("dx", N, 2 * F);
    const Vec hx = ktest::fill_random(x, rng, -4, 4), hdy = ktest::fill_random(dy, rng);
    ktest::poison(y);
    kk::swiglu_forward(Exec(), y, x);
    EXPECT_LT(ktest::rel_err(ktest::to_host(y), ktest::ref::swiglu_forward(hx, N, F)), 1e-5);
    ktest::poison(dx);
    kk::swiglu_backward(Exec(), dx, x, dy);
    const Vec got = ktest::to_host(dx);
    EXPECT_LT(ktest::rel_err(got, ktest::ref::swiglu_backward(hx, hdy, N, F)), 1e-5);
    kk::swiglu_backward(Exec(), dx, x, dy);
    ktest::expect_bitwise_equal(got, ktest::to_host(dx), "swiglu dinp");
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
  const auto [N, C] = random_shape(rng);
  View<float**> a("a", N, C), b("b", N, C), y("y", N, C), da("da", N, C), db("db", N, C);
  const Vec ha = ktest::fill_random(a, rng), hb = ktest::fill_random(b, rng);
  ktest::poison(y);
  kk::residual_forward(Exec(), y, a, b);
  Vec sum(ha.size());
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = ha[i] + hb[i];
  EXPECT_LT(ktest::rel_err(ktest::to_host(y), sum), 1e-7);
  ktest::poison(da);
  ktest::poison(db);
  kk::residual_backward(Exec(), da, db, y);
  ktest::expect_bitwise_equal(ktest::to_host(da), ktest::to_host(y), "residual da");
  ktest::expect_bitwise_equal(ktest::to_host(db), ktest::to_host(y), "residual db");
}

// RoPE on a packed qkv-like buffer: the first nrot heads rotated, the rest copied.
TEST(RoPE, MatchesReferenceAndIsDeterministic) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int hds[] = {2, 12, 20, 64};
  for (int hd : hds) {
    std::uniform_int_distribution<int> bt(1, 9), heads(1, 4), off(0, 3000);
    const int B = bt(rng), T = bt(rng), nrot = heads(rng), W = (nrot + heads(rng)) * hd, pos0 = off(rng);
    SCOPED_TRACE("hd=" + std::to_string(hd) + " pos0=" + std::to_string(pos0));
    View<float***> x("x", B, T, W), y("y", B, T, W), dy("dy", B, T, W), dx("dx", B, T, W);
    const Vec hx = ktest::fill_random(x, rng), hdy = ktest::fill_random(dy, rng);
    ktest::poison(y);
    kk::rope_forward(Exec(), y, x, nrot, hd, pos0);
    EXPECT_LT(ktest::rel_err(ktest::to_host(y), ktest::ref::rope(hx, B, T, W, nrot, hd, pos0, 1e4, 1)), 1e-6);
    ktest::poison(dx);
    kk::rope_backward(Exec(), dx, dy, nrot, hd, pos0);
    const Vec got = ktest::to_host(dx);
    EXPECT_LT(ktest::rel_err(got, ktest::ref::rope(hdy, B, T, W, nrot, hd, pos0, 1e4, -1)), 1e-6);
    kk::rope_backward(Exec(), dx, dy, nrot, hd, pos0);
    ktest::expect_bitwise_equal(got, ktest::to_host(dx), "rope dx");
    kk::rope_forward(Exec(), x, x, nrot, hd, pos0);  // in place
    ktest::expect_bitwise_equal(ktest::to_host(x), ktest::to_host(y), "rope in place");
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

}  // namespace
