// GEMM and the linear layer (kernels/gemm/gemm.hpp): native and vendor against a float64 reference,
// the reference backward against central finite differences, shapes that are not multiples of
// any tile (and 1-sized ones), NaN-poisoned outputs, bitwise run-to-run determinism, and
// native == vendor. bf16 GEMM (bf16 A and B, fp32 accumulation and C): every element within the
// fp32 accumulation bound of a float64 reference on the bf16 values, and native bitwise equal to
// the fp32 native GEMM of the widened operands.
#include <cmath>
#include <cstring>

#include "finite_diff.hpp"
#include "gemm.hpp"
#include "kernel_test_util.hpp"
#include "reference_gemm.hpp"
#include "reference_pointwise.hpp"

namespace {

using namespace kformer::kernels;
using kformer::kernels::bf16;
using ktest::Exec;
using Vec = std::vector<double>;
using namespace ktest::gemm_ref;

struct Shape {
  int n, in, out;
};
// Tiles are 192 x 256 x 256 on the host, 128 x 128 x 8 or 64 x 64 x 8 on a GPU (test_gemm_team.cpp
// runs those here too): cover edges, several K chunks, 1s;
// the bias gradient sums 128-row chunks of 64 columns on the host: several chunks, part blocks.
const Shape kShapes[] = {{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {3, 300, 2}, {97, 33, 257}, {13, 270, 37}, {130, 65, 70}, {260, 9, 130}};

std::vector<GemmImpl> impls() {
  std::vector<GemmImpl> v{GemmImpl::native};
  if (gemm_vendor_available<Exec>()) v.push_back(GemmImpl::vendor);
  return v;
}

Vec ref_forward(const Shape& s, const Vec& x, const Vec& w, const Vec& b) {
  return ref_gemm(false, true, s.n, s.out, s.in, 1, x, w, 0, Vec(s.n * s.out), b);
}
struct Grads {
  Vec dx, dw, db;
};
// dx = dy W, dw = dw0 + dy^T x, db = db0 + colsum(dy).
Grads ref_backward(const Shape& s, const Vec& dy, const Vec& x, const Vec& w, const Vec& dw0, const Vec& db0) {
  Grads g{ref_gemm(false, false, s.n, s.in, s.out, 1, dy, w, 0, Vec(s.n * s.in)),
          ref_gemm(true, false, s.out, s.in, s.n, 1, dy, x, 1, dw0), db0};
  for (int i = 0; i < s.n; ++i)
    for (int j = 0; j < s.out; ++j) g.db[j] += dy[i * s.out + j];
  return g;
}

TEST(Gemm, ReferenceBackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(ktest::fresh_seed());
  std::uniform_real_distribution<double> u(-1, 1);
  const Shape s{3, 4, 5};
  auto rnd = [&](int n) {
    Vec v(n);
    for (auto& e : v) e = u(rng);
    return v;
  };
  Vec x = rnd(s.n * s.in), w = rnd(s.out * s.in), b = rnd(s.out), g = rnd(s.n * s.out);
  auto loss = [&]() {  // L = sum(y * g), so dL/dy = g
    const Vec y = ref_forward(s, x, w, b);
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i) l += y[i] * g[i];
    return l;
  };
  const Grads an = ref_backward(s, g, x, w, Vec(w.size()), Vec(b.size()));
  const double h = 1e-6;
  auto check = [&](Vec& p, const Vec& grad) {
    Vec fd(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double p0 = p[i];
      p[i] = p0 + h;
      const double lp = loss();
      p[i] = p0 - h;
      const double lm = loss();
      p[i] = p0;
      fd[i] = (lp - lm) / (2 * h);
    }
    EXPECT_LT(ktest::rel_err(grad, fd), 1e-8);
  };
  check(x, an.dx);
  check(w, an.dw);
  check(b, an.db);
}

TEST(Gemm, AllTranspositionsMatchReference) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (GemmImpl impl : impls())
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (const Shape& s : kShapes) {
          const int M = s.n, K = s.in, N = s.out;
          ktest::View<float**> a("a", ta ? K : M, ta ? M : K), b("b", tb ? N : K, tb ? K : N), c("c", M, N);
          ktest::View<float*> bias("bias", N);
          const Vec ha = ktest::fill_random(a, rng), hb = ktest::fill_random(b, rng);
          const Vec hc = ktest::fill_random(c, rng), hbias = ktest::fill_random(bias, rng);
          gemm(Exec(), impl, ta ? Op::T : Op::N, tb ? Op::T : Op::N, 0.5f, a, b, 2.0f, c, bias);
          EXPECT_LT(scaled_err(ktest::to_host(c), ta, tb, M, N, K, 0.5, ha, hb, 2.0, hc, hbias), 1e-5)
              << to_string(impl) << " ta=" << ta << " tb=" << tb << " " << M << "x" << K << "x" << N;
          ktest::poison(c);  // beta = 0 must not read C
          gemm(Exec(), impl, ta ? Op::T : Op::N, tb ? Op::T : Op::N, 1.0f, a, b, 0.0f, c);
          EXPECT_LT(ktest::rel_err(ktest::to_host(c), ref_gemm(ta, tb, M, N, K, 1, ha, hb, 0, hc)), 1e-5);
        }
}

// A K long enough that the host's native GEMM packs it in several chunks (its pack budget made
// small for the test), with a bias and beta != 0, every transposition.
TEST(Gemm, NativeLongKInSeveralPackChunks) {
  std::mt19937_64 rng(ktest::fresh_seed());
  auto& budget = detail::gemm_pack_budget_floats();
  const std::int64_t saved = budget;
  budget = 64 * 1024;  // 3 chunks of 256 k at the shape below (on the host; a GPU packs per team)
  const int M = 70, K = 700, N = 45;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      ktest::View<float**> a("a", ta ? K : M, ta ? M : K), b("b", tb ? N : K, tb ? K : N), c("c", M, N);
      ktest::View<float*> bias("bias", N);
      const Vec ha = ktest::fill_random(a, rng), hb = ktest::fill_random(b, rng);
      const Vec hc = ktest::fill_random(c, rng), hbias = ktest::fill_random(bias, rng);
      gemm(Exec(), GemmImpl::native, ta ? Op::T : Op::N, tb ? Op::T : Op::N, 0.5f, a, b, 2.0f, c, bias);
      EXPECT_LT(ktest::rel_err(ktest::to_host(c), ref_gemm(ta, tb, M, N, K, 0.5, ha, hb, 2.0, hc, hbias)), 1e-5)
          << "ta=" << ta << " tb=" << tb;
    }
  budget = saved;
}

// Inputs of one linear layer, with parameter gradients pre-filled (they accumulate).
struct Layer {
  ktest::View<float**> x, w, y, dy, dx, dw;
  ktest::View<float*> b, db;
  Vec hx, hw, hb, hdy, hdw0, hdb0;
  Layer(const Shape& s, std::mt19937_64& rng)
      : x("x", s.n, s.in), w("w", s.out, s.in), y("y", s.n, s.out), dy("dy", s.n, s.out), dx("dx", s.n, s.in),
        dw("dw", s.out, s.in), b("b", s.out), db("db", s.out) {
    hx = ktest::fill_random(x, rng), hw = ktest::fill_random(w, rng), hb = ktest::fill_random(b, rng);
    hdy = ktest::fill_random(dy, rng), hdw0 = ktest::fill_random(dw, rng), hdb0 = ktest::fill_random(db, rng);
    ktest::poison(y), ktest::poison(dx);
  }
  void run(GemmImpl impl) {
    matmul_forward(Exec(), impl, y, x, w, b);
    matmul_backward(Exec(), impl, dx, dw, db, dy, x, w);
  }
};

// Bounds in the measure of reference_gemm.hpp's scaled_err: gamma(K) = (K + 1) 2^-24 for a sum of
// K terms, for every seed and CPU. A plain relative error read 1.2e-5 against this test's old 1e-5
// once in a suite run: a 1x1x1 layer whose dw0 + dy x nearly vanished.
double gamma(std::int64_t terms) { return double(terms + 1) * std::ldexp(1.0, -24); }

TEST(Matmul, ForwardBackwardMatchReference) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (GemmImpl impl : impls())
    for (const Shape& s : kShapes) {
      Layer l(s, rng);
      l.run(impl);
      const Grads g = ref_backward(s, l.hdy, l.hx, l.hw, l.hdw0, l.hdb0);
      // The same sums over |inputs|: every term counted positive.
      const Grads ga = ref_backward(s, abs_of(l.hdy), abs_of(l.hx), abs_of(l.hw), abs_of(l.hdw0), abs_of(l.hdb0));
      const Vec ya = ref_forward(s, abs_of(l.hx), abs_of(l.hw), abs_of(l.hb));
      const std::string what = std::string(to_string(impl)) + " " + std::to_string(s.n) + "x" +
                                std::to_string(s.in) + "x" + std::to_string(s.out);
      // y: in products and the bias; dx: out products; dw, db: n products and the earlier value.
      EXPECT_LE(scaled_err(ktest::to_host(l.y), ref_forward(s, l.hx, l.hw, l.hb), ya), gamma(s.in + 1)) << what;
      EXPECT_LE(scaled_err(ktest::to_host(l.dx), g.dx, ga.dx), gamma(s.out)) << what;
      EXPECT_LE(scaled_err(ktest::to_host(l.dw), g.dw, ga.dw), gamma(s.n + 1)) << what;
      EXPECT_LE(scaled_err(ktest::to_host(l.db), g.db, ga.db), gamma(s.n + 1)) << what;
    }
}

TEST(Matmul, BackwardIsBitwiseDeterministic) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (GemmImpl impl : impls()) {
    const Shape s{130, 300, 70};
    Layer l(s, rng);
    ktest::View<float**> dw0("dw0", s.out, s.in);
    ktest::View<float*> db0("db0", s.out);
    Kokkos::deep_copy(dw0, l.dw), Kokkos::deep_copy(db0, l.db);
    std::vector<std::vector<double>> first;
    for (int run = 0; run < 3; ++run) {
      Kokkos::deep_copy(l.dw, dw0), Kokkos::deep_copy(l.db, db0), ktest::poison(l.dx);
      matmul_backward(Exec(), impl, l.dx, l.dw, l.db, l.dy, l.x, l.w);
      std::vector<std::vector<double>> out{ktest::to_host(l.dx), ktest::to_host(l.dw), ktest::to_host(l.db)};
      if (run == 0) first = out;
      for (std::size_t k = 0; k < out.size(); ++k)
        EXPECT_EQ(0, std::memcmp(out[k].data(), first[k].data(), out[k].size() * sizeof(double)))
            << to_string(impl) << " output " << k << " differs in run " << run;
    }
  }
}

TEST(Matmul, NativeAndVendorAgree) {
  if (!gemm_vendor_available<Exec>()) GTEST_SKIP() << "no vendor GEMM for this backend in this build";
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const Shape& s : kShapes) {
    Layer nat(s, rng);
    Layer ven = nat;  // views are shared: copy the state before running
    ven.y = ktest::View<float**>("yv", s.n, s.out), ven.dx = ktest::View<float**>("dxv", s.n, s.in);
    ven.dw = ktest::View<float**>("dwv", s.out, s.in), ven.db = ktest::View<float*>("dbv", s.out);
    Kokkos::deep_copy(ven.dw, nat.dw), Kokkos::deep_copy(ven.db, nat.db);
    nat.run(GemmImpl::native);
    ven.run(GemmImpl::vendor);
    EXPECT_LT(ktest::rel_err(ktest::to_host(nat.y), ktest::to_host(ven.y)), 1e-5);
    EXPECT_LT(ktest::rel_err(ktest::to_host(nat.dx), ktest::to_host(ven.dx)), 1e-5);
    EXPECT_LT(ktest::rel_err(ktest::to_host(nat.dw), ktest::to_host(ven.dw)), 1e-5);
    EXPECT_LT(ktest::rel_err(ktest::to_host(nat.db), ktest::to_host(ven.db)), 1e-5);
  }
}

// --- bf16 inputs -------------------------------------------------------------------------------

void bf16_transpositions(GemmImpl impl) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const Shape& s : kShapes) {
        const int M = s.n, K = s.in, N = s.out;
        ktest::View<bf16**> a("a", ta ? K : M, ta ? M : K), b("b", tb ? N : K, tb ? K : N);
        ktest::View<float**> c("c", M, N);
        ktest::View<float*> bias("bias", N);
        const Vec ha = ktest::fill_random(a, rng), hb = ktest::fill_random(b, rng);  // the bf16 values
        const Vec hc = ktest::fill_random(c, rng), hbias = ktest::fill_random(bias, rng);
        const std::string what = std::string(to_string(impl)) + " ta=" + std::to_string(ta) +
                                 " tb=" + std::to_string(tb) + " " + std::to_string(M) + "x" + std::to_string(K) +
                                 "x" + std::to_string(N);
        std::string first;
        gemm(Exec(), impl, ta ? Op::T : Op::N, tb ? Op::T : Op::N, 0.5f, a, b, 2.0f, c, bias);
        EXPECT_EQ(beyond_fp32_bound(ktest::to_host(c), ta, tb, M, N, K, 0.5, ha, hb, 2.0, hc, hbias, first), 0u)
            << what << ", " << first;
        ktest::poison(c);  // beta = 0 must not read C
        gemm(Exec(), impl, ta ? Op::T : Op::N, tb ? Op::T : Op::N, 1.0f, a, b, 0.0f, c);
        EXPECT_EQ(beyond_fp32_bound(ktest::to_host(c), ta, tb, M, N, K, 1, ha, hb, 0, hc, {}, first), 0u)
            << what << " beta=0, " << first;
      }
}

TEST(GemmBf16, AllTranspositionsWithinTheFp32AccumulationBound) {
  // native: the AVX512-BF16 path where the CPU has it, then the widening path in any case.
  ::testing::Test::RecordProperty("avx512_bf16", detail::cpu_has_avx512_bf16() ? "yes" : "no");
  for (GemmImpl impl : impls()) bf16_transpositions(impl);
  detail::gemm_bf16_dot_allowed() = false;
  bf16_transpositions(GemmImpl::native);
  detail::gemm_bf16_dot_allowed() = true;
  if (gemm_vendor_available<Exec>() && runs_on_host<Exec>)
    ::testing::Test::RecordProperty("bf16_vendor", detail::host_gemm_bf16_library());
}

// The AVX512-BF16 path with K in several pack chunks and an odd last chunk (a padded pair),
// every transposition, within the bound.
TEST(GemmBf16, Avx512Bf16PathWithLongAndOddK) {
  if (!runs_on_host<Exec> || !detail::cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937_64 rng(ktest::fresh_seed());
  auto& budget = detail::gemm_pack_budget_floats();
  const std::int64_t saved = budget;
  budget = 64 * 1024;
  for (const int K : {701, 3, 1})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        const int M = 70, N = 45;
        ktest::View<bf16**> a("a", ta ? K : M, ta ? M : K), b("b", tb ? N : K, tb ? K : N);
        ktest::View<float**> c("c", M, N);
        ktest::View<float*> bias("bias", N);
        const Vec ha = ktest::fill_random(a, rng), hb = ktest::fill_random(b, rng);
        const Vec hc = ktest::fill_random(c, rng), hbias = ktest::fill_random(bias, rng);
        gemm(Exec(), GemmImpl::native, ta ? Op::T : Op::N, tb ? Op::T : Op::N, 0.5f, a, b, 2.0f, c, bias);
        std::string first;
        EXPECT_EQ(beyond_fp32_bound(ktest::to_host(c), ta, tb, M, N, K, 0.5, ha, hb, 2.0, hc, hbias, first), 0u)
            << "K=" << K << " ta=" << ta << " tb=" << tb << ", " << first;
      }
  budget = saved;
}

// The host vendor path without oneDNN (as where it is missing, or has no bf16 on the CPU).
TEST(GemmBf16, HostVendorFallbackToWidenedSgemm) {
  if (!gemm_vendor_available<Exec>() || !runs_on_host<Exec>) GTEST_SKIP() << "no host vendor GEMM in this build";
  detail::host_gemm_bf16_try_dnnl() = false;
  bf16_transpositions(GemmImpl::vendor);
  detail::host_gemm_bf16_try_dnnl() = true;
  EXPECT_STREQ(detail::host_gemm_bf16_library(), "OpenBLAS sgemm on fp32 copies");
}

// Widening while packing changes nothing else: the bf16 native GEMM (its widening path; the
// AVX512-BF16 one sums in another order) is bitwise the fp32 native GEMM of the operands
// converted to fp32, also with K in several pack chunks.
TEST(GemmBf16, NativeIsBitwiseTheFp32GemmOfTheWidenedOperands) {
  std::mt19937_64 rng(ktest::fresh_seed());
  detail::gemm_bf16_dot_allowed() = false;
  auto& budget = detail::gemm_pack_budget_floats();
  const std::int64_t saved = budget;
  for (const std::int64_t b : {saved, std::int64_t(64 * 1024)}) {
    budget = b;
    const int M = 70, K = 700, N = 45;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        ktest::View<bf16**> a("a", ta ? K : M, ta ? M : K), bm("b", tb ? N : K, tb ? K : N);
        ktest::fill_random(a, rng), ktest::fill_random(bm, rng);
        const ktest::View<float**> a32 = widened(a), b32 = widened(bm);
        ktest::View<float**> c("c", M, N), c32("c32", M, N);
        ktest::View<float*> bias("bias", N);
        ktest::fill_random(c, rng), ktest::fill_random(bias, rng);
        Kokkos::deep_copy(c32, c);
        gemm(Exec(), GemmImpl::native, ta ? Op::T : Op::N, tb ? Op::T : Op::N, 0.5f, a, bm, 2.0f, c, bias);
        gemm(Exec(), GemmImpl::native, ta ? Op::T : Op::N, tb ? Op::T : Op::N, 0.5f, a32, b32, 2.0f, c32, bias);
        const Vec got = ktest::to_host(c), want = ktest::to_host(c32);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(double)))
            << "ta=" << ta << " tb=" << tb << " pack budget " << b;
      }
  }
  budget = saved;
  detail::gemm_bf16_dot_allowed() = true;
}

// A layer's output kept in bf16 (matmul_forward_stored): y within one bf16 rounding of the
// float64 reference plus the fp32 accumulation bound, and the GELU output bitwise gelu_forward of
// the stored y, whichever path ran: oneDNN writing bf16 with the bias in its epilogue (host
// vendor), or the fp32 scratch and a convert (native; vendor without oneDNN). cuBLASLt's epilogue
// (CUDA vendor with a bias) takes its GELU from the fp32 sum: act within a bf16 rounding of the
// float64 GELU of the reference, plus what the sums' error makes of it.
// Returns how many cases cuBLASLt's epilogue wrote.
int stored_outputs(GemmImpl impl, std::mt19937_64& rng, const std::string& what) {
  int by_lt = 0;
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.push_back({97, 300, 136}), shapes.push_back({8, 16, 8});  // outputs cuBLASLt's GELU epilogue takes
  for (const Shape& s : shapes)
    for (const bool gelu : {false, true})
      for (const bool with_bias : {false, true}) {
        ktest::View<bf16**> x("x", s.n, s.in), w("w", s.out, s.in), y("y", s.n, s.out), act("act", s.n, s.out);
        ktest::View<bf16**> want_act("want_act", s.n, s.out);
        ktest::View<float**> y32("y32", s.n, s.out);
        ktest::View<float*> b("b", with_bias ? s.out : 0);
        const Vec hx = ktest::fill_random(x, rng), hw = ktest::fill_random(w, rng), hb = ktest::fill_random(b, rng);
        ktest::poison(y), ktest::poison(act), ktest::poison(y32);
        const ktest::View<bf16**> act_or_none = gelu ? act : ktest::View<bf16**>();
        const bool lt = stored_by_cublaslt<Exec>(impl, y, act_or_none, x, w, b);
        by_lt += lt ? 1 : 0;
        matmul_forward_stored(Exec(), impl, y, y32, act_or_none, x, w, b);
        const Vec got = ktest::to_host(y);
        const Vec ref = ref_forward(s, hx, hw, with_bias ? hb : Vec(s.out, 0.0));
        const Vec got_act = gelu ? ktest::to_host(act) : Vec();
        std::size_t bad = 0, bad_act = 0;
        for (int i = 0; i < s.n; ++i)
          for (int j = 0; j < s.out; ++j) {
            double mag = with_bias ? std::fabs(hb[j]) : 0.0;
            for (int k = 0; k < s.in; ++k) mag += std::fabs(hx[i * s.in + k] * hw[j * s.in + k]);
            const double r = ref[i * s.out + j], sums = (s.in + 2) * std::ldexp(mag, -23);
            if (!(std::fabs(got[i * s.out + j] - r) <= std::ldexp(std::fabs(r), -8) + sums)) ++bad;
            // cuBLASLt's GELU of the fp32 sum, rounded once: gelu' is under 1.13 in magnitude; 1e-3
            // more covers its own GELU (tanh or erf form) beside the float64 tanh form.
            const double g = ktest::ref::gelu(r);
            if (lt && gelu && !(std::fabs(got_act[i * s.out + j] - g) <= std::ldexp(std::fabs(g), -8) + 1.13 * sums + 1e-3))
              ++bad_act;
          }
        EXPECT_EQ(bad, 0u) << what << " " << s.n << "x" << s.in << "x" << s.out << " gelu=" << gelu
                           << " bias=" << with_bias;
        EXPECT_EQ(bad_act, 0u) << what << " " << s.n << "x" << s.in << "x" << s.out << ": cuBLASLt's act";
        if (!gelu || lt) continue;
        gelu_forward(Exec(), want_act, y);
        const Vec ga = ktest::to_host(act), wa = ktest::to_host(want_act);
        EXPECT_EQ(0, std::memcmp(ga.data(), wa.data(), ga.size() * sizeof(double)))
            << what << " " << s.n << "x" << s.in << "x" << s.out << ": act is not gelu of the stored y";
      }
  return by_lt;
}

TEST(GemmBf16, StoredOutputWithinOneRoundingAndItsGeluBitwise) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (GemmImpl impl : impls())
    ::testing::Test::RecordProperty(std::string("cublaslt_cases_") + to_string(impl), stored_outputs(impl, rng, to_string(impl)));
#if defined(KOKKOS_ENABLE_CUDA)
  if (gemm_vendor_available<Exec>() && !runs_on_host<Exec>) {
    detail::cublaslt_epilogues_on() = false;  // the fp32 C and passes cuBLASLt's epilogues replace
    stored_outputs(GemmImpl::vendor, rng, "vendor without cuBLASLt's epilogues");
    detail::cublaslt_epilogues_on() = true;
  }
#endif
  if (!gemm_vendor_available<Exec>() || !runs_on_host<Exec>) return;
  ::testing::Test::RecordProperty("vendor_writes_bf16", gemm_writes_bf16<Exec>(GemmImpl::vendor, true) ? "yes" : "no");
  if (gemm_writes_bf16<Exec>(GemmImpl::vendor, true))
    EXPECT_STREQ(detail::host_gemm_bf16_library(), "oneDNN matmul (bf16, bias and bf16 output in its epilogue)");
  EXPECT_FALSE(gemm_writes_bf16<Exec>(GemmImpl::native, true));
  detail::host_gemm_bf16_try_dnnl() = false;  // the vendor's fp32 C and convert, as without oneDNN
  EXPECT_FALSE(gemm_writes_bf16<Exec>(GemmImpl::vendor, true));
  stored_outputs(GemmImpl::vendor, rng, "vendor without oneDNN");
  detail::host_gemm_bf16_try_dnnl() = true;
}

// The bias gradient alone in both work shapes (kernels/work_shape.hpp), fp32 and bf16 dy: rows
// over several chunks of either shape's size (32 and 128 rows) and a part chunk, against the
// float64 column sums added to the earlier value, within gamma(n + 1); bitwise the same run to
// run; a second call adds to the first.
template <class T>
void bias_gradients(std::mt19937_64& rng) {
  const std::pair<int, int> shapes[] = {{1, 1}, {31, 5}, {33, 70}, {130, 65}, {300, 129}};
  for (const auto& nc : shapes) {
    const int n = nc.first, cols = nc.second;
    SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(cols));
    ktest::View<T**> dy("dy", n, cols);
    ktest::View<float*> db("db", cols), db0("db0", cols);
    const Vec hdy = ktest::fill_random(dy, rng), hdb0 = ktest::fill_random(db0, rng);
    Vec ref = hdb0, scale = abs_of(hdb0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < cols; ++j) ref[j] += hdy[i * cols + j], scale[j] += std::abs(hdy[i * cols + j]);
    ktest::for_each_shape([&](auto shape) {
      constexpr kformer::kernels::Shape S = decltype(shape)::value;
      Kokkos::deep_copy(db, db0);
      bias_backward<S>(Exec(), db, ktest::View<const T**>(dy));
      Kokkos::fence();
      const Vec once = ktest::to_host(db);
      EXPECT_LE(scaled_err(once, ref, scale), gamma(n + 1));
      Kokkos::deep_copy(db, db0);
      bias_backward<S>(Exec(), db, ktest::View<const T**>(dy));
      Kokkos::fence();
      ktest::expect_bitwise_equal(once, ktest::to_host(db), "db run to run");
      bias_backward<S>(Exec(), db, ktest::View<const T**>(dy));  // a second micro-batch adds to it
      Kokkos::fence();
      Vec ref2 = ref, scale2 = scale;
      for (int j = 0; j < cols; ++j) ref2[j] += ref[j] - hdb0[j], scale2[j] += scale[j] - std::abs(hdb0[j]);
      EXPECT_LE(scaled_err(ktest::to_host(db), ref2, scale2), gamma(n + 2)) << "db must accumulate";
    });
  }
}

TEST(BiasBackward, BothShapesMatchReferenceFp32AndBf16) {
  std::mt19937_64 rng(ktest::fresh_seed());
  {
    SCOPED_TRACE("fp32 dy");
    bias_gradients<float>(rng);
  }
  {
    SCOPED_TRACE("bf16 dy");
    bias_gradients<bf16>(rng);
  }
}

TEST(Gemm, SelectionByNameAndMissingVendorAreClearErrors) {
  EXPECT_EQ(parse_gemm_impl("native"), GemmImpl::native);
  EXPECT_EQ(parse_gemm_impl("vendor"), GemmImpl::vendor);
  EXPECT_THROW(parse_gemm_impl("cublas"), std::invalid_argument);
  ktest::View<float**> a("a", 2, 3), b("b", 3, 4), c("c", 2, 4), bad("bad", 5, 4);
  EXPECT_THROW(gemm(Exec(), GemmImpl::native, Op::N, Op::N, 1.f, a, bad, 0.f, c), std::invalid_argument);
  if (!gemm_vendor_available<Exec>())
    EXPECT_THROW(gemm(Exec(), GemmImpl::vendor, Op::N, Op::N, 1.f, a, b, 0.f, c), std::runtime_error);
  else
    EXPECT_NO_THROW(gemm(Exec(), GemmImpl::vendor, Op::N, Op::N, 1.f, a, b, 0.f, c));
}

}  // namespace
