// The GPU-shaped fused attention (GpuAttentionTile, kernels/attention_gpu_*.hpp), and so the
// tensor-core shape (TensorCoreTile, attention_tc_*.hpp), on this test's execution space -- Serial
// and OpenMP as well as CUDA -- against the float64 reference and the naive kernel: forward and
// backward, head_dim 64 and 128, GQA (H=8, KV=2), T not a multiple of any tile, float and bf16
// elements; bitwise repeatability; the scratch each pass asks for at head_dim 64 and 128 within
// level-0 shared memory; the league order a device takes the tiles in. A tiny configuration
// (several head_dim chunks, 2 x 2 threads) runs the tile logic on odd shapes.
#include "attention.hpp"
#include "finite_diff.hpp"
#include "kernel_test_util.hpp"
#include "reference_attention.hpp"

#include <set>
#include <tuple>

namespace {

using ktest::Exec;
using ktest::View;
using ktest::ref::AttnShape;
namespace kk = kformer::kernels;
using Gpu = kk::GpuAttentionTile;
using Tc = kk::TensorCoreTile;

struct TinyTile {
  static constexpr bool gpu_shaped = true;
  static constexpr int BQ = 8, BK = 4, BQS = 4, team = 2, vector = 2, pad_row = 1, pad_tile = 2, hd_chunk = 8;
};

std::string describe(const AttnShape& s) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
         " KV=" + std::to_string(s.KV) + " hd=" + std::to_string(s.hd);
}

struct Result {
  std::vector<double> out, lse, dqkv;
};

// Forward and backward of the fused kernels with configuration Cfg, on poisoned outputs.
template <class Cfg, class E>
Result run_fused(const AttnShape& s, const View<E***>& qkv, const View<E***>& dout) {
  View<E***> out("out", s.B, s.T, s.H * s.hd), dqkv("dqkv", s.B, s.T, s.W());
  View<float***> lse("lse", s.B, s.H, s.T), delta("delta", s.B, s.H, s.T);
  ktest::poison(out);
  ktest::poison(dqkv);
  ktest::poison(lse);
  kk::attention_fused_forward<Cfg>(Exec(), out, lse, qkv, s.H, s.KV);
  kk::attention_fused_backward<Cfg>(Exec(), dqkv, delta, dout, qkv, out, lse, s.H, s.KV);
  Kokkos::fence();
  return {ktest::to_host(out), ktest::to_host(lse), ktest::to_host(dqkv)};
}

Result run_naive(const AttnShape& s, const View<float***>& qkv, const View<float***>& dout) {
  View<float***> out("out", s.B, s.T, s.H * s.hd), dqkv("dqkv", s.B, s.T, s.W());
  auto state = kk::make_attention_state<Exec>(kk::AttentionKind::naive, s.B, s.T, s.H);
  kk::attention_forward(Exec(), out, state, qkv, s.H, s.KV);
  kk::attention_backward(Exec(), dqkv, state, dout, qkv, out, s.H, s.KV);
  Kokkos::fence();
  return {ktest::to_host(out), {}, ktest::to_host(dqkv)};
}

// Float inputs: Cfg against the float64 reference (and the naive kernel when asked), and a
// second run gives the same bits.
template <class Cfg>
void check_float(const AttnShape& s, std::mt19937_64& rng, bool against_naive) {
  SCOPED_TRACE(describe(s));
  View<float***> qkv("qkv", s.B, s.T, s.W()), dout("dout", s.B, s.T, s.H * s.hd);
  const auto hqkv = ktest::fill_random(qkv, rng, -2, 2), hdout = ktest::fill_random(dout, rng);
  const Result r = run_fused<Cfg>(s, qkv, dout);
  EXPECT_LT(ktest::rel_err(r.out, ktest::ref::attention_forward(hqkv, s)), 1e-5);
  EXPECT_LT(ktest::rel_err(r.dqkv, ktest::ref::attention_backward(hqkv, hdout, s)), 1e-5);
  if (against_naive) {
    const Result n = run_naive(s, qkv, dout);
    EXPECT_LT(ktest::rel_err(r.out, n.out), 1e-5);
    EXPECT_LT(ktest::rel_err(r.dqkv, n.dqkv), 1e-5);
  }
  const Result again = run_fused<Cfg>(s, qkv, dout);
  ktest::expect_bitwise_equal(r.out, again.out, "out run to run");
  ktest::expect_bitwise_equal(r.lse, again.lse, "lse run to run");
  ktest::expect_bitwise_equal(r.dqkv, again.dqkv, "dqkv run to run");
}

TEST(AttentionTiles, GpuTileMatchesReferenceAndNaive) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const int hd : {64, 128}) check_float<Gpu>(AttnShape{2, 200, 8, 2, hd}, rng, true);
}

TEST(AttentionTiles, GpuTileOnBf16MatchesReference) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const int hd : {64, 128}) {
    const AttnShape s{1, 200, 8, 2, hd};
    SCOPED_TRACE(describe(s));
    View<kk::bf16***> qkv("qkv", s.B, s.T, s.W()), dout("dout", s.B, s.T, s.H * s.hd);
    const auto hqkv = ktest::fill_random(qkv, rng, -2, 2), hdout = ktest::fill_random(dout, rng);
    const Result r = run_fused<Gpu>(s, qkv, dout);
    // One bf16 rounding of each output, plus (backward) the rounded output inside delta.
    EXPECT_LT(ktest::rel_err(r.out, ktest::ref::attention_forward(hqkv, s)), 6e-3);
    EXPECT_LT(ktest::rel_err(r.dqkv, ktest::ref::attention_backward(hqkv, hdout, s)), 1.2e-2);
    const Result again = run_fused<Gpu>(s, qkv, dout);
    ktest::expect_bitwise_equal(r.out, again.out, "bf16 out run to run");
    ktest::expect_bitwise_equal(r.dqkv, again.dqkv, "bf16 dqkv run to run");
  }
}

// Odd shapes (T=1, head_dim not a multiple of the lanes, GQA ratios 1 to 4) with both GPU-shaped
// configurations; TinyTile splits head_dim into chunks of 8.
TEST(AttentionTiles, OddShapesMatchReference) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const AttnShape shapes[] = {{1, 1, 2, 1, 12}, {2, 7, 4, 4, 20}, {1, 65, 4, 2, 12},
                              {2, 37, 4, 1, 6}, {1, 33, 3, 3, 17}, {1, 70, 8, 2, 40}};
  for (const AttnShape& s : shapes) {
    check_float<Gpu>(s, rng, false);
    check_float<TinyTile>(s, rng, false);
  }
}

// The tensor-core shape (3xTF32 products, attention_tc_*.hpp; emulated from the lanes' fragments
// on a host backend): head_dim 64 and 128 with GQA against the reference and naive, then odd shapes
// (T = 1, T not a multiple of its 32-row tiles or of a warp's 16, head_dim 8 to 40, GQA 1 to 4).
TEST(AttentionTiles, TensorCoreTileMatchesReferenceAndNaive) {
  if (!kk::runs_on_host<Exec> && !kk::detail::tensor_core_space<Exec>)
    GTEST_SKIP() << "a device build without compute capability 8.0 has no tf32 mma";
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const int hd : {64, 128}) check_float<Tc>(AttnShape{2, 200, 8, 2, hd}, rng, true);
  const AttnShape shapes[] = {{1, 1, 2, 1, 8},   {2, 7, 4, 4, 16}, {1, 65, 4, 2, 24},
                              {1, 47, 3, 3, 40}, {1, 33, 4, 1, 32}};
  for (const AttnShape& s : shapes) check_float<Tc>(s, rng, false);
}

// The shape refuses a head_dim it cannot hold, in one line naming it.
TEST(AttentionTiles, TensorCoreTileRefusesHeadDimNotAMultipleOf8) {
  const AttnShape s{1, 16, 2, 1, 12};
  View<float***> qkv("qkv", s.B, s.T, s.W()), out("out", s.B, s.T, s.H * s.hd);
  View<float***> lse("lse", s.B, s.H, s.T);
  try {
    kk::attention_fused_forward<Tc>(Exec(), out, lse, qkv, s.H, s.KV);
    FAIL() << "head_dim 12 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 8"), std::string::npos) << e.what();
  }
}

// Level-0 scratch per team within what Kokkos' CUDA backend grants (kLevel0Budget: 40 KiB in
// 3.4, 48 KiB less 8 KiB for team reductions in 4.6); on a device also this backend's limit.
// The tensor-core shape's too (its staged tiles).
TEST(AttentionTiles, GpuScratchFitsLevel0AtHeadDim64And128) {
  using S = kk::detail::GpuScratch<Gpu>;
  using Policy = Kokkos::TeamPolicy<Exec>;
  for (const int hd : {64, 128}) {
    for (const int floats : {S::forward(hd), S::dq(hd), S::dkv(hd)}) {
      const std::size_t bytes = kk::detail::ScratchFloats<Exec>::shmem_size(floats);
      EXPECT_LE(bytes, std::size_t(kk::detail::kLevel0Budget)) << "hd=" << hd << " floats=" << floats;
      if (!kk::runs_on_host<Exec>) EXPECT_LE(bytes, std::size_t(Policy::scratch_size_max(0))) << "hd=" << hd;
    }
  }
  for (const int hd : {64, 128}) {
    const std::size_t bytes = kk::detail::ScratchFloats<Exec>::shmem_size(kk::detail::tc_scratch<Tc>(hd));
    EXPECT_LE(bytes, std::size_t(kk::detail::kLevel0Budget)) << "tensor cores, hd=" << hd;
    if (!kk::runs_on_host<Exec>) EXPECT_LE(bytes, std::size_t(Policy::scratch_size_max(0))) << "hd=" << hd;
  }
}

// A device's league order (gpu_tile_of) gives every tile of every (batch, head) once, as tile_of
// does, and never a tile of less causal work before one of more: the forward's and dQ's longest
// tiles are the last rows (longest_first), the dK/dV pass's the first.
TEST(AttentionTiles, GpuLeagueOrderCoversEveryTileOnceLongestFirst) {
  const int B = 3, heads = 5, ntiles = 7, edge = 32, T = ntiles * edge - 5, league = B * heads * ntiles;
  for (const bool longest_first : {true, false}) {
    std::set<std::tuple<int, int, int, int>> gpu, host;
    int previous = ntiles + 1;
    for (int r = 0; r < league; ++r) {
      const auto g = kk::detail::gpu_tile_of(r, league, ntiles, heads, edge, T, longest_first);
      const auto h = kk::detail::tile_of(r, ntiles, heads, edge, T, longest_first);
      gpu.insert({g.b, g.h, g.r0, g.n});
      host.insert({h.b, h.h, h.r0, h.n});
      EXPECT_TRUE(g.b >= 0 && g.b < B && g.h >= 0 && g.h < heads && g.r0 % edge == 0 && g.r0 < T) << "r " << r;
      const int t = g.r0 / edge, work = longest_first ? t + 1 : ntiles - t;  // key or query tiles it sees
      EXPECT_LE(work, previous) << "r " << r << ": a shorter tile came first";
      previous = work;
    }
    EXPECT_EQ(gpu.size(), std::size_t(league));
    EXPECT_EQ(gpu, host);
  }
}

}  // namespace
