// The native GEMM's team driver (kernels/gemm/gemm_team.hpp), the one GPUs run, in the GPU's tile
// configurations and an odd one, on whatever backend this binary is built for (Serial and OpenMP
// included, where a team has fewer members than logical threads): against a float64 reference
// for every transposition with alpha, beta and a bias, at shapes that are no multiple of any tile
// and with K = 0; bf16 operands within the fp32 accumulation bound and bitwise the fp32 GEMM of
// the widened operands; bitwise equal run to run and from one tile configuration to another
// (each element is summed in the same order by all of them). And the GELU epilogue of every
// path (team, host shared packing, vendor): C unchanged by it, the activation bitwise
// gelu_forward of the pre-activation (rounded to bf16 for a bf16 output) and matmul_forward_gelu
// bitwise matmul_forward then gelu_forward (close to it where cuBLASLt's epilogues run).
#include <cstring>

#include "activations.hpp"
#include "convert.hpp"
#include "gemm.hpp"
#include "kernel_test_util.hpp"
#include "reference_gemm.hpp"
#include "reference_pointwise.hpp"

namespace {

using namespace kformer::kernels;
using namespace ktest::gemm_ref;
using ktest::Exec;
template <class T>
using View = ktest::View<T>;

using Large = GemmGpuTiles::Large;
using Small = GemmGpuTiles::Small;
using Odd = GemmTeamTiles<32, 64, 4, 4, 8>;  // 64 threads, TK = 4, taller than wide per thread

struct Dims {
  int M, N, K;
};
// Edges in both directions and in K (TK = 4 or 8), one tile or several, 1s, K = 0.
const Dims kDims[] = {{200, 130, 70}, {1, 1, 1}, {5, 3, 9}, {130, 257, 33}, {300, 260, 17}, {7, 9, 0}};

std::string dims_name(int ta, int tb, const Dims& d) {
  return "ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " " + std::to_string(d.M) + "x" +
         std::to_string(d.N) + "x" + std::to_string(d.K);
}

// One GEMM call with tile configuration Tiles (native) or the vendor library.
template <class Tiles, class T, class TAct = float>
void run(GemmImpl impl, int ta, int tb, float alpha, const View<T**>& a, const View<T**>& b, float beta,
         const View<float**>& c, const View<float*>& bias, const View<TAct**>& act = {}) {
  detail::gemm_any<Exec, T, T, Tiles>(Exec(), impl, ta ? Op::T : Op::N, tb ? Op::T : Op::N, alpha, a, b, beta, c,
                                      GemmEpilogue<Exec, TAct>{bias, act});
}

bool same_bits(const Vec& x, const Vec& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

template <class Tiles>
void matches_reference(const char* name) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const Dims& d : kDims) {
        View<float**> a("a", ta ? d.K : d.M, ta ? d.M : d.K), b("b", tb ? d.N : d.K, tb ? d.K : d.N), c("c", d.M, d.N);
        View<float*> bias("bias", d.N);
        const Vec ha = ktest::fill_random(a, rng), hb = ktest::fill_random(b, rng);
        const Vec hc = ktest::fill_random(c, rng), hbias = ktest::fill_random(bias, rng);
        run<Tiles>(GemmImpl::native, ta, tb, 0.5f, a, b, 2.0f, c, bias);
        EXPECT_LT(scaled_err(ktest::to_host(c), ta, tb, d.M, d.N, d.K, 0.5, ha, hb, 2.0, hc, hbias), 1e-5)
            << name << " " << dims_name(ta, tb, d);
        ktest::poison(c);  // beta = 0 must not read C
        run<Tiles>(GemmImpl::native, ta, tb, 1.0f, a, b, 0.0f, c, View<float*>());
        EXPECT_LT(scaled_err(ktest::to_host(c), ta, tb, d.M, d.N, d.K, 1, ha, hb, 0, hc, {}), 1e-5)
            << name << " beta=0 " << dims_name(ta, tb, d);
      }
}

TEST(GemmTeam, GpuConfigurationsMatchReferenceInEveryTransposition) {
  matches_reference<Large>("128x128x8");
  matches_reference<Small>("64x64x8");
  matches_reference<Odd>("32x64x4");
  matches_reference<GemmGpuTiles>("large or small by size");
}

// Two runs of one configuration and the other configurations: the same bits.
TEST(GemmTeam, BitwiseAcrossRunsAndTileConfigurations) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const Dims& d : {Dims{200, 130, 70}, Dims{300, 260, 17}}) {
        View<float**> a("a", ta ? d.K : d.M, ta ? d.M : d.K), b("b", tb ? d.N : d.K, tb ? d.K : d.N), c("c", d.M, d.N);
        View<float*> bias("bias", d.N);
        View<float**> c0("c0", d.M, d.N);
        ktest::fill_random(a, rng), ktest::fill_random(b, rng), ktest::fill_random(bias, rng);
        ktest::fill_random(c0, rng);
        const auto once = [&](auto tiles) {
          Kokkos::deep_copy(c, c0);
          run<decltype(tiles)>(GemmImpl::native, ta, tb, 0.5f, a, b, 2.0f, c, bias);
          return ktest::to_host(c);
        };
        const Vec first = once(Large{});
        EXPECT_TRUE(same_bits(first, once(Large{}))) << "second run, " << dims_name(ta, tb, d);
        EXPECT_TRUE(same_bits(first, once(Small{}))) << "64x64x8 against 128x128x8, " << dims_name(ta, tb, d);
        EXPECT_TRUE(same_bits(first, once(Odd{}))) << "32x64x4 against 128x128x8, " << dims_name(ta, tb, d);
      }
}

// bf16 operands are widened while staged: within the fp32 accumulation bound of the float64
// reference, and bitwise the fp32 team GEMM of the widened operands.
template <class Tiles>
void bf16_operands(const char* name) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const Dims& d : kDims) {
        View<bf16**> a("a", ta ? d.K : d.M, ta ? d.M : d.K), b("b", tb ? d.N : d.K, tb ? d.K : d.N);
        View<float**> c("c", d.M, d.N), c32("c32", d.M, d.N);
        View<float*> bias("bias", d.N);
        const Vec ha = ktest::fill_random(a, rng), hb = ktest::fill_random(b, rng);
        const Vec hc = ktest::fill_random(c, rng), hbias = ktest::fill_random(bias, rng);
        Kokkos::deep_copy(c32, c);
        run<Tiles>(GemmImpl::native, ta, tb, 0.5f, a, b, 2.0f, c, bias);
        run<Tiles>(GemmImpl::native, ta, tb, 0.5f, widened(a), widened(b), 2.0f, c32, bias);
        std::string first;
        const Vec got = ktest::to_host(c);
        EXPECT_EQ(beyond_fp32_bound(got, ta, tb, d.M, d.N, d.K, 0.5, ha, hb, 2.0, hc, hbias, first), 0u)
            << name << " " << dims_name(ta, tb, d) << ", " << first;
        EXPECT_TRUE(same_bits(got, ktest::to_host(c32))) << name << " " << dims_name(ta, tb, d);
      }
}

TEST(GemmTeam, Bf16OperandsWithinFp32BoundAndBitwiseTheWidenedGemm) {
  bf16_operands<Large>("128x128x8");
  bf16_operands<Small>("64x64x8");
}

// --- the GELU epilogue -------------------------------------------------------------------------

// gelu_forward of C (the unfused form), into an output of type TAct (C rounded to bf16 first
// when TAct is bf16, as a layer that keeps its pre-activation in bf16 does).
template <class TAct>
View<TAct**> gelu_of(const View<float**>& c) {
  View<TAct**> pre("pre", c.extent(0), c.extent(1)), act("act", c.extent(0), c.extent(1));
  convert(Exec(), pre, c);
  gelu_forward(Exec(), act, pre);
  return act;
}

// One path (Tiles, impl) with operands T and activation TAct: C as without the epilogue, the
// activation bitwise gelu_forward's, and close to GELU of the float64 reference.
template <class Tiles, class T, class TAct>
void gelu_epilogue(GemmImpl impl, const char* name, std::mt19937_64& rng) {
  // K = 600 spans several K steps of the host's shared-packing driver (the GELU follows the last).
  for (const Dims& d : {Dims{70, 45, 600}, Dims{200, 130, 70}, Dims{5, 3, 0}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        View<T**> a("a", ta ? d.K : d.M, ta ? d.M : d.K), b("b", tb ? d.N : d.K, tb ? d.K : d.N);
        View<float**> c("c", d.M, d.N), plain("plain", d.M, d.N);
        View<float*> bias("bias", d.N);
        View<TAct**> act("act", d.M, d.N);
        const Vec ha = ktest::fill_random(a, rng, -2, 2), hb = ktest::fill_random(b, rng);
        const Vec hc = ktest::fill_random(c, rng), hbias = ktest::fill_random(bias, rng);
        Kokkos::deep_copy(plain, c);
        ktest::poison(act);
        const std::string what = std::string(name) + " " + dims_name(ta, tb, d);
        run<Tiles>(impl, ta, tb, 0.5f, a, b, 2.0f, c, bias, act);
        run<Tiles>(impl, ta, tb, 0.5f, a, b, 2.0f, plain, bias);
        const Vec hc_got = ktest::to_host(c), act_got = ktest::to_host(act);
        EXPECT_TRUE(same_bits(hc_got, ktest::to_host(plain))) << "C changed by the epilogue, " << what;
        EXPECT_TRUE(same_bits(act_got, ktest::to_host(gelu_of<TAct>(c)))) << what;
        Vec want = ref_gemm(ta, tb, d.M, d.N, d.K, 0.5, ha, hb, 2.0, hc, hbias);
        for (double& v : want) v = ktest::ref::gelu(v);
        const double tol = std::is_same<TAct, bf16>::value ? 1e-2 : 1e-5;  // bf16 rounds pre and act
        EXPECT_LT(ktest::rel_err(act_got, want), tol) << what;
      }
}

template <class T, class TAct>
void gelu_every_path(std::mt19937_64& rng) {
  gelu_epilogue<GemmTiles<Exec>, T, TAct>(GemmImpl::native, "native (this backend's tiles)", rng);
  gelu_epilogue<Large, T, TAct>(GemmImpl::native, "native 128x128x8", rng);
  gelu_epilogue<Small, T, TAct>(GemmImpl::native, "native 64x64x8", rng);
  if (gemm_vendor_available<Exec>()) gelu_epilogue<GemmTiles<Exec>, T, TAct>(GemmImpl::vendor, "vendor", rng);
}

TEST(GemmEpilogue, GeluIsBitwiseGeluForwardOfThePreactivation) {
  std::mt19937_64 rng(ktest::fresh_seed());
  detail::gemm_bf16_dot_allowed() = false;  // the bf16 widening path; the AVX512-BF16 one below
  gelu_every_path<float, float>(rng);
  gelu_every_path<float, bf16>(rng);
  gelu_every_path<bf16, bf16>(rng);
  detail::gemm_bf16_dot_allowed() = true;
  if (detail::cpu_has_avx512_bf16()) gelu_epilogue<GemmTiles<Exec>, bf16, bf16>(GemmImpl::native, "AVX512-BF16", rng);
}

// The layer: matmul_forward_gelu is matmul_forward then (rounding and) gelu_forward, bit for bit,
// except for the vendor GEMM on a GPU: there cuBLASLt's epilogues (the bias; the bias and GELU,
// `out` a multiple of 8 as its GELU output needs) and cuBLAS may sum in different orders, and
// cuBLASLt's GELU is its own, so y is within the fp32 sums' error of matmul_forward's and act
// close to gelu_forward of y.
template <class T>
void forward_gelu(GemmImpl impl, std::mt19937_64& rng) {
  const int n = 97, in = 300, out = 136;
  View<T**> x("x", n, in), w("w", out, in), act("act", n, out);
  View<float**> y("y", n, out), y2("y2", n, out);
  View<float*> b("b", out);
  ktest::fill_random(x, rng), ktest::fill_random(w, rng), ktest::fill_random(b, rng);
  ktest::poison(y), ktest::poison(y2), ktest::poison(act);
  matmul_forward_gelu(Exec(), impl, y, act, x, w, b);
  matmul_forward(Exec(), impl, y2, x, w, b);
  if (impl == GemmImpl::vendor && !runs_on_host<Exec>) {
    EXPECT_LT(ktest::rel_err(ktest::to_host(y), ktest::to_host(y2)), 1e-5);
    const double tol = std::is_same<T, float>::value ? 2e-3 : 1e-2;
    EXPECT_LT(ktest::rel_err(ktest::to_host(act), ktest::to_host(gelu_of<T>(y))), tol);
    return;
  }
  EXPECT_TRUE(same_bits(ktest::to_host(y), ktest::to_host(y2))) << to_string(impl);
  EXPECT_TRUE(same_bits(ktest::to_host(act), ktest::to_host(gelu_of<T>(y2)))) << to_string(impl);
}

TEST(GemmEpilogue, MatmulForwardGeluIsForwardThenGelu) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (GemmImpl impl : {GemmImpl::native, GemmImpl::vendor}) {
    if (impl == GemmImpl::vendor && !gemm_vendor_available<Exec>()) continue;
    forward_gelu<float>(impl, rng);
    forward_gelu<bf16>(impl, rng);
  }
  View<float**> a("a", 2, 3), b("b", 3, 4), c("c", 2, 4), bad("bad", 4, 2);
  EXPECT_THROW(gemm(Exec(), GemmImpl::native, Op::N, Op::N, 1.f, a, b, 0.f, c, GemmEpilogue<Exec>{{}, bad}),
               std::invalid_argument);
}

}  // namespace
