// One warp's 3xTF32 tensor-core product (kernels/attention/warp_mma.hpp) on this test's execution
// space: on a host backend the emulation built from every lane's fragments, on a CUDA device the
// mma.sync instruction itself. Checks the fragment maps cover their matrices once each, that a
// product of 16 x K by K x 8 NT (fewer tiles used than held) matches float64 within fp32's
// accuracy (a bound some fifty times under what one tf32 product a term would give), that a
// product's C fragments serve the next product as its A operand in registers (c_as_a, the other
// side's rows in c_order_row's order), as the attention's P V does, and the quad reductions a
// softmax row takes.
#include "kernel_test_util.hpp"
#include "attention_tiles.hpp"
#include "warp_mma.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <utility>

namespace {

using ktest::Exec;
using ktest::View;
namespace kd = kformer::kernels::detail;

TEST(WarpMma, FragmentsCoverTheirMatricesOnce) {
  std::set<std::pair<int, int>> a, b, c;
  for (int l = 0; l < kd::kWarpLanes; ++l) {
    for (int i = 0; i < 4; ++i) a.insert({kd::mma_a_row(l, i), kd::mma_a_col(l, i)});
    for (int i = 0; i < 2; ++i) b.insert({kd::mma_b_row(l, i), kd::mma_b_col(l, i)});
    for (int i = 0; i < 4; ++i) c.insert({kd::mma_c_row(l, i), kd::mma_c_col(l, i)});
  }
  EXPECT_EQ(a.size(), 128u);  // 16 x 8
  EXPECT_EQ(b.size(), 64u);   // 8 x 8
  EXPECT_EQ(c.size(), 128u);  // 16 x 8
  for (const auto& e : a) EXPECT_TRUE(e.first < 16 && e.second < 8);
  for (const auto& e : b) EXPECT_TRUE(e.first < 8 && e.second < 8);
  for (const auto& e : c) EXPECT_TRUE(e.first < 16 && e.second < 8);
  // The PTX ISA's lane 5 (g 1, t 1): A (1,1) (9,1) (1,5) (9,5); B (1,1) (5,1); C (1,2) (1,3) (9,2) (9,3).
  EXPECT_EQ(kd::mma_a_row(5, 3) * 8 + kd::mma_a_col(5, 3), 9 * 8 + 5);
  EXPECT_EQ(kd::mma_b_row(5, 1) * 8 + kd::mma_b_col(5, 1), 5 * 8 + 1);
  EXPECT_EQ(kd::mma_c_row(5, 2) * 8 + kd::mma_c_col(5, 2), 9 * 8 + 2);
}

// c_as_a's element i at k-step ks of lane l is the C element of the same row whose column is the
// A column's in c_order_row's order; c_order_row permutes each block of 8 rows.
TEST(WarpMma, CFragmentsServeAsAInTheReorderedColumns) {
  for (int l = 0; l < kd::kWarpLanes; ++l)
    for (int ks = 0; ks < 4; ++ks)
      for (int i = 0; i < 4; ++i) {
        const int k = kd::c_as_a_index(ks, i), e = k & 3;
        EXPECT_EQ(kd::mma_c_row(l, e), kd::mma_a_row(l, i)) << "lane " << l << " i " << i;
        EXPECT_EQ(8 * (k >> 2) + kd::mma_c_col(l, e), kd::c_order_row(8 * ks + kd::mma_a_col(l, i)))
            << "lane " << l << " ks " << ks << " i " << i;
      }
  for (int blk = 0; blk < 3; ++blk) {
    std::set<int> rows;
    for (int k = 8 * blk; k < 8 * blk + 8; ++k) rows.insert(kd::c_order_row(k));
    EXPECT_EQ(rows.size(), 8u);
    EXPECT_EQ(*rows.begin(), 8 * blk);
    EXPECT_EQ(*rows.rbegin(), 8 * blk + 7);
  }
}

constexpr int kTiles = 4, kSteps = 8;  // C fragments held, k-steps of 8 at most

// The warp's kTiles C fragments of acc into C (16 x 8 kTiles).
template <class Regs>
KOKKOS_INLINE_FUNCTION void store_fragments(const View<float**>& C, Regs& acc) {
  kd::each_lane<Exec>([&](int l) {
    kd::for_each_c_element<kTiles>(l, [&](int k, int r, int c) { C(r, c) = acc.at(0, l)[k]; });
  });
}

// The product tests need the instruction where they run on a device.
#define SKIP_WITHOUT_TF32_MMA()                                                 \
  if (!kformer::kernels::runs_on_host<Exec> && !kd::tensor_core_space<Exec>) \
  GTEST_SKIP() << "a device build without compute capability 8.0 has no tf32 mma"

// A given by its elements, a(r, k) for row r < 16 and column k, as warp_product takes it.
template <class F>
struct RowsAsFragments {
  F a;
  KOKKOS_INLINE_FUNCTION float operator()(int ks, int i, int l) const {
    return a(kd::mma_a_row(l, i), 8 * ks + kd::mma_a_col(l, i));
  }
};
template <class F>
KOKKOS_INLINE_FUNCTION RowsAsFragments<F> a_rows(const F& a) {
  return RowsAsFragments<F>{a};
}

// C (16 x 8 kTiles) = A (16 x K) B (K x 8 kTiles) by one warp, `used` tiles computed (the rest
// stay at the value they start with, -1).
View<float**> warp_product_of(const View<float**>& A, const View<float**>& B, int used) {
  const int K = static_cast<int>(A.extent(1));
  View<float**> C("C", 16, 8 * kTiles);
  using Policy = Kokkos::TeamPolicy<Exec>;
  const int vector = kformer::kernels::runs_on_host<Exec> ? 1 : kd::kWarpLanes;
  Kokkos::parallel_for(
      "warp_product", Policy(Exec(), 1, 1, vector), KOKKOS_LAMBDA(const Policy::member_type&) {
        kd::WarpRegs<Exec, 1, 4 * kTiles> acc;
        kd::each_lane<Exec>([&](int l) {
          for (int k = 0; k < 4 * kTiles; ++k) acc.at(0, l)[k] = -1.f;
        });
        kd::warp_product<Exec, kTiles, kSteps>(
            acc, 0, used, K / 8, a_rows([&](int r, int k) { return A(r, k); }),
            [&](int k, int n) { return B(k, n); });
        store_fragments(C, acc);
      });
  Kokkos::fence();
  return C;
}

TEST(WarpMma, ProductMatchesFloat64WithinFp32Accuracy) {
  SKIP_WITHOUT_TF32_MMA();
  std::mt19937_64 rng(ktest::fresh_seed());
  const int K = 56, used = 3;  // fewer k-steps (7) and tiles (3) than the warp holds
  View<float**> A("A", 16, K), B("B", K, 8 * kTiles);
  const auto ha = ktest::fill_random(A, rng), hb = ktest::fill_random(B, rng);
  const auto hc = ktest::to_host(warp_product_of(A, B, used));
  double worst = 0.0;
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8 * kTiles; ++n) {
      const double got = hc[r * 8 * kTiles + n];
      if (n >= 8 * used) {
        EXPECT_EQ(got, -1.0) << "tile " << n / 8 << " was not to be computed";
        continue;
      }
      double ref = -1.0, mag = 0.0;
      for (int k = 0; k < K; ++k) {
        ref += ha[r * K + k] * hb[k * 8 * kTiles + n];
        mag += std::abs(ha[r * K + k] * hb[k * 8 * kTiles + n]);
      }
      worst = std::max(worst, std::abs(got - ref) / (mag + 1.0));
    }
  // fp32 sums of 64 terms: a few 1e-7 of their magnitude. One tf32 product (10 mantissa bits) is
  // about 1e-3 off a term, 1e-4 of such a sum: 3xTF32 must stay far below that.
  EXPECT_LT(worst, 2e-6);
}

// O (16 x 8 kTiles) = (A B) V by one warp: A B's C fragments (16 x 8 kTiles) the A operand of the
// second product in registers, V's rows in c_order_row's order.
View<float**> warp_chain_of(const View<float**>& A, const View<float**>& B, const View<float**>& V) {
  const int K = static_cast<int>(A.extent(1));
  View<float**> O("O", 16, 8 * kTiles);
  using Policy = Kokkos::TeamPolicy<Exec>;
  const int vector = kformer::kernels::runs_on_host<Exec> ? 1 : kd::kWarpLanes;
  Kokkos::parallel_for(
      "warp_chain", Policy(Exec(), 1, 1, vector), KOKKOS_LAMBDA(const Policy::member_type&) {
        kd::WarpRegs<Exec, 1, 4 * kTiles> p, o;
        kd::fill_warp(p, 0, 0.f);
        kd::fill_warp(o, 0, 0.f);
        kd::warp_product<Exec, kTiles, kSteps>(p, 0, kTiles, K / 8, a_rows([&](int r, int k) { return A(r, k); }),
                                              [&](int k, int n) { return B(k, n); });
        kd::warp_product<Exec, kTiles, kTiles>(o, 0, kTiles, kTiles, kd::c_as_a(p, 0),
                                              [&](int k, int n) { return V(kd::c_order_row(k), n); });
        store_fragments(O, o);
      });
  Kokkos::fence();
  return O;
}

TEST(WarpMma, CFragmentsAsTheNextProductsAMatchFloat64) {
  SKIP_WITHOUT_TF32_MMA();
  std::mt19937_64 rng(ktest::fresh_seed());
  const int K = 24, N = 8 * kTiles;
  View<float**> A("A", 16, K), B("B", K, N), V("V", N, N);
  const auto ha = ktest::fill_random(A, rng), hb = ktest::fill_random(B, rng), hv = ktest::fill_random(V, rng);
  const auto ho = ktest::to_host(warp_chain_of(A, B, V));
  double worst = 0.0;
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < N; ++n) {
      double ref = 0.0, mag = 0.0;
      for (int j = 0; j < N; ++j) {
        double p = 0.0, pm = 0.0;
        for (int k = 0; k < K; ++k) {
          p += ha[r * K + k] * hb[k * N + j];
          pm += std::abs(ha[r * K + k] * hb[k * N + j]);
        }
        ref += p * hv[j * N + n];
        mag += pm * std::abs(hv[j * N + n]);
      }
      worst = std::max(worst, std::abs(ho[r * N + n] - ref) / (mag + 1.0));
    }
  EXPECT_LT(worst, 2e-6);  // as the single product: two fp32 sums, 3xTF32 each
}

// Each lane's max over its quad of (l * 7) % 5 + l / 4, and its sum over its quad of l.
std::pair<View<float*>, View<float*>> quad_reductions() {
  View<float*> mx("max", kd::kWarpLanes), sum("sum", kd::kWarpLanes);
  using Policy = Kokkos::TeamPolicy<Exec>;
  const int vector = kformer::kernels::runs_on_host<Exec> ? 1 : kd::kWarpLanes;
  Kokkos::parallel_for(
      "quad", Policy(Exec(), 1, 1, vector), KOKKOS_LAMBDA(const Policy::member_type&) {
        kd::WarpRegs<Exec, 1, 1> x, y;
        kd::each_lane<Exec>([&](int l) {
          x.at(0, l)[0] = float((l * 7) % 5) + 0.25f * l;
          y.at(0, l)[0] = float(l);
        });
        kd::quad_allreduce(x, 0, [](float a, float b) { return a > b ? a : b; });
        kd::quad_allreduce(y, 0, [](float a, float b) { return a + b; });
        kd::each_lane<Exec>([&](int l) {
          mx(l) = x.at(0, l)[0];
          sum(l) = y.at(0, l)[0];
        });
      });
  Kokkos::fence();
  return {mx, sum};
}

TEST(WarpMma, QuadReductionsGiveEveryLaneOfARowTheSame) {
  const auto [mx, sum] = quad_reductions();
  const auto hm = ktest::to_host(mx), hs = ktest::to_host(sum);
  for (int l = 0; l < kd::kWarpLanes; ++l) {
    const int g = l / 4;
    double m = -1e30;
    for (int t = 0; t < 4; ++t) m = std::max(m, double((4 * g + t) * 7 % 5) + 0.25 * (4 * g + t));
    EXPECT_EQ(hm[l], m) << "lane " << l;
    EXPECT_EQ(hs[l], 16.0 * g + 6.0) << "lane " << l;
  }
}

}  // namespace
