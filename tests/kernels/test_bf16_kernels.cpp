// The memory-bound kernels and attention on bf16 activations (train.precision=bf16): each
// against the float64 reference of its exact (bf16-representable) inputs, within what one bf16
// rounding of the output allows, or, where the output is fp32, within fp32 tolerances (the
// arithmetic must be fp32, not bf16). The pointwise kernels must also equal their fp32 result
// rounded once: same arithmetic, one rounding at the store.
#include "activations.hpp"
#include "attention.hpp"
#include "convert.hpp"
#include "finite_diff.hpp"
#include "kernel_test_util.hpp"
#include "layernorm.hpp"
#include "reference_attention.hpp"
#include "reference_pointwise.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"

namespace {

using ktest::Exec;
using ktest::View;
namespace kk = kformer::kernels;
using kk::bf16;
using Vec = std::vector<double>;

// A bf16 output's norm-wise error: one rounding to nearest, at most u = 2^-8 = 3.9e-3 relative per
// element and so norm-wise whatever the inputs (about 1.5e-3 in the mean), plus fp32 noise (1e-6).
// A bound for every seed and CPU: 3e-3 held only in the mean, and a few elements can pass it.
constexpr double kBf16Tol = 4e-3;
// An fp32 output computed from bf16 inputs: fp32 arithmetic only.
constexpr double kF32Tol = 2e-5;

Vec rounded(const Vec& v) {
  Vec r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = double(kk::round_to_bf16(float(v[i])));
  return r;
}

// The same values (bf16-exact) in a float view and a bf16 view.
std::pair<View<float*>, View<bf16*>> twin(std::mt19937_64& rng, Vec& host, double lo, double hi, std::size_t n) {
  View<bf16*> h("h", n);
  host = ktest::fill_random(h, rng, lo, hi);
  View<float*> f("f", n);
  kk::convert(Exec(), f, h);
  Kokkos::fence();
  return {f, h};
}

template <class T>
View<T**> mat(const View<T*>& v, int r, int c) {
  return View<T**>(v.data(), r, c);
}

TEST(Bf16Kernels, ConvertRoundsToNearestEvenAndWidensExactly) {
  std::mt19937_64 rng(ktest::fresh_seed());
  View<float*> f("f", 1001), back("back", 1001);  // not a multiple of a thread's lanes
  View<bf16*> h("h", 1001);
  const Vec hf = ktest::fill_random(f, rng, -100, 100);
  ktest::for_each_shape([&](auto shape) {
    constexpr kk::Shape S = decltype(shape)::value;
    ktest::poison(h);
    ktest::poison(back);
    kk::convert<S>(Exec(), h, f);
    kk::convert<S>(Exec(), back, h);
    Kokkos::fence();
    const Vec got = ktest::to_host(back);
    for (std::size_t i = 0; i < hf.size(); ++i) ASSERT_EQ(got[i], double(kk::round_to_bf16(float(hf[i])))) << i;
    EXPECT_LT(ktest::rel_err(got, hf), kBf16Tol);
    EXPECT_GT(ktest::rel_err(got, hf), 0.0);  // it did round
  });
}

// In both work shapes: on the host the GPU shape holds C = 24 in 8-channel runs, bf16 read and
// written as 16-byte words (norm_registers.hpp), and its fp32 twin in the same runs, so that on a
// device the two sum in the same order and the bf16 output is the fp32 one rounded, bit for bit.
TEST(Bf16Kernels, NormsFromBf16InputsMatchReference) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const bool centered : {true, false})
    for (const auto nc : {std::pair<int, int>{5, 13}, {7, 24}, {17, 64}, {33, 203}}) {
      const int N = nc.first, C = nc.second;
      SCOPED_TRACE((centered ? "layernorm N=" : "rmsnorm N=") + std::to_string(N) + " C=" + std::to_string(C));
      Vec hx, hdy, hw, hb;
      auto x = twin(rng, hx, -2, 3, std::size_t(N) * C);
      View<float*> w("w", C), b("b", C), mean("mean", N), rstd("rstd", N), dw("dw", C), db("db", C);
      hw = ktest::fill_random(w, rng, 0.5, 1.5);
      hb = centered ? ktest::fill_random(b, rng) : Vec();
      auto dy = twin(rng, hdy, -1, 1, std::size_t(N) * C);
      View<bf16*> out16("out16", std::size_t(N) * C), dx16("dx16", std::size_t(N) * C);
      View<float*> out32("out32", std::size_t(N) * C), dx("dx", std::size_t(N) * C);
      const auto X16 = mat(x.second, N, C);
      const auto X32 = mat(x.first, N, C);
      ktest::for_each_shape([&](auto shape) {
        constexpr kk::Shape S = decltype(shape)::value;
        ktest::poison(out16), ktest::poison(out32), ktest::poison(dx), ktest::poison(dx16);
        Kokkos::deep_copy(dw, 0.f), Kokkos::deep_copy(db, 0.f);
        if (centered) {
          kk::layernorm_forward<S>(Exec(), mat(out32, N, C), mean, rstd, X32, w, b);
          kk::layernorm_forward<S>(Exec(), mat(out16, N, C), mean, rstd, X16, w, b);
          kk::layernorm_backward<S>(Exec(), mat(dx, N, C), dw, db, mat(dy.first, N, C), X16, w, mean, rstd);
          kk::layernorm_backward<S>(Exec(), mat(dx16, N, C), dw, db, mat(dy.second, N, C), X16, w, mean, rstd);
        } else {
          kk::rmsnorm_forward<S>(Exec(), mat(out32, N, C), rstd, X32, w);
          kk::rmsnorm_forward<S>(Exec(), mat(out16, N, C), rstd, X16, w);
          kk::rmsnorm_backward<S>(Exec(), mat(dx, N, C), dw, mat(dy.first, N, C), X16, w, rstd);
          kk::rmsnorm_backward<S>(Exec(), mat(dx16, N, C), dw, mat(dy.second, N, C), X16, w, rstd);
        }
        Kokkos::fence();
        const auto ref = ktest::ref::norm_forward(hx, hw, hb, N, C, 1e-5, centered);
        EXPECT_LT(ktest::rel_err(ktest::to_host(out16), ref.out), kBf16Tol);
        // In the execution space's own shape (the GPU's on a device); the host compiler may vectorise
        // the float and bf16 instantiations of the other shape's loops apart.
        if (S == kk::shape_for<kk::Shape::natural, Exec>)
          ktest::expect_bitwise_equal(ktest::to_host(out16), rounded(ktest::to_host(out32)), "bf16 = rounded fp32");
        Vec rdx, rdw, rdb;
        ktest::ref::norm_backward(hdy, hx, hw, N, C, 1e-5, centered, rdx, rdw, rdb);
        EXPECT_LT(ktest::rel_err(ktest::to_host(dx), rdx), kF32Tol);
        EXPECT_LT(ktest::rel_err(ktest::to_host(dx16), rdx), kBf16Tol);  // from bf16 dy (the same values)
        for (auto& v : rdw) v *= 2;  // both backward calls added theirs
        EXPECT_LT(ktest::rel_err(ktest::to_host(dw), rdw), kF32Tol);
      });
    }
}

TEST(Bf16Kernels, GeluSwigluResidualMatchReference) {
  ktest::for_each_shape([&](auto shape) {
    constexpr kk::Shape S = decltype(shape)::value;
    std::mt19937_64 rng(ktest::fresh_seed());
    const int N = 37, F = 70;
    Vec hin, hd;
    auto in = twin(rng, hin, -3, 3, std::size_t(N) * 2 * F);
    auto dout = twin(rng, hd, -1, 1, std::size_t(N) * 2 * F);
    View<bf16*> o16("o16", std::size_t(N) * 2 * F), d16("d16", std::size_t(N) * 2 * F);
    View<float*> o32("o32", std::size_t(N) * 2 * F);
    // GELU over all (N,2F) elements: forward bf16 -> bf16, backward with an fp32 upstream gradient.
    kk::gelu_forward<S>(Exec(), mat(o16, N, 2 * F), mat(in.second, N, 2 * F));
    kk::gelu_forward<S>(Exec(), mat(o32, N, 2 * F), mat(in.first, N, 2 * F));
    kk::gelu_backward<S>(Exec(), mat(d16, N, 2 * F), mat(in.second, N, 2 * F), mat(dout.first, N, 2 * F));
    Kokkos::fence();
    Vec rg(hin.size()), rdg(hin.size());
    for (std::size_t i = 0; i < hin.size(); ++i) {
      rg[i] = ktest::ref::gelu(hin[i]);
      rdg[i] = hd[i] * ktest::ref::gelu_grad(hin[i]);
    }
    EXPECT_LT(ktest::rel_err(ktest::to_host(o16), rg), kBf16Tol);
    ktest::expect_bitwise_equal(ktest::to_host(o16), rounded(ktest::to_host(o32)), "gelu bf16 = rounded fp32");
    EXPECT_LT(ktest::rel_err(ktest::to_host(d16), rdg), kBf16Tol);

    // SwiGLU: inp (N,2F) -> out (N,F).
    View<bf16*> s16("s16", std::size_t(N) * F);
    View<float*> s32("s32", std::size_t(N) * F);
    kk::swiglu_forward<S>(Exec(), mat(s16, N, F), mat(in.second, N, 2 * F));
    kk::swiglu_forward<S>(Exec(), mat(s32, N, F), mat(in.first, N, 2 * F));
    View<float*> g("g", std::size_t(N) * F);
    const Vec hg = ktest::fill_random(g, rng);
    kk::swiglu_backward<S>(Exec(), mat(d16, N, 2 * F), mat(in.second, N, 2 * F), mat(g, N, F));
    Kokkos::fence();
    EXPECT_LT(ktest::rel_err(ktest::to_host(s16), ktest::ref::swiglu_forward(hin, N, F)), kBf16Tol);
    ktest::expect_bitwise_equal(ktest::to_host(s16), rounded(ktest::to_host(s32)), "swiglu bf16 = rounded fp32");
    EXPECT_LT(ktest::rel_err(ktest::to_host(d16), ktest::ref::swiglu_backward(hin, hg, N, F)), kBf16Tol);

    // Residual: bf16 + fp32 into bf16, and into fp32 (exact: the sum of a bf16 and a float
    // differs from float64 by one fp32 rounding).
    View<float*> r32("r32", std::size_t(N) * 2 * F);
    kk::residual_forward<S>(Exec(), o16, in.second, dout.first);
    kk::residual_forward<S>(Exec(), r32, in.second, dout.first);
    Kokkos::fence();
    Vec rs(hin.size());
    for (std::size_t i = 0; i < hin.size(); ++i) rs[i] = hin[i] + hd[i];
    EXPECT_LT(ktest::rel_err(ktest::to_host(o16), rs), kBf16Tol);
    EXPECT_LT(ktest::rel_err(ktest::to_host(r32), rs), 1e-7);
  });
}

TEST(Bf16Kernels, RopeOnBf16MatchesReference) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int B = 2, T = 19, hd = 16, nrot = 3, W = 5 * hd;
  Vec hx;
  auto x = twin(rng, hx, -2, 2, std::size_t(B) * T * W);
  View<bf16***> y16("y16", B, T, W);
  View<float***> y32("y32", B, T, W), back("back", B, T, W);
  const View<bf16***> X16(x.second.data(), B, T, W);
  const View<float***> X32(x.first.data(), B, T, W);
  kk::rope_forward(Exec(), y16, X16, nrot, hd, 3);
  kk::rope_forward(Exec(), y32, X32, nrot, hd, 3);
  kk::rope_backward(Exec(), back, y16, nrot, hd, 3);  // bf16 in, fp32 out
  Kokkos::fence();
  EXPECT_LT(ktest::rel_err(ktest::to_host(y16), ktest::ref::rope(hx, B, T, W, nrot, hd, 3, 10000.0, 1)), kBf16Tol);
  ktest::expect_bitwise_equal(ktest::to_host(y16), rounded(ktest::to_host(y32)), "rope bf16 = rounded fp32");
  const Vec ry = ktest::to_host(y16);
  EXPECT_LT(ktest::rel_err(ktest::to_host(back), ktest::ref::rope(ry, B, T, W, nrot, hd, 3, 10000.0, -1)), kF32Tol);
}

// Causal softmax in float64 over rows of T scores hs: the probabilities into ref, and the backward
// from the stored (rounded) probabilities got and the gradient hdp into rds.
void causal_softmax_reference(const Vec& hs, const Vec& hdp, const Vec& got, int rows, int T, Vec& ref, Vec& rds) {
  ref.assign(got.size(), 0.0), rds.assign(got.size(), 0.0);
  for (int r = 0; r < rows; ++r) {
    const int t = r % T;
    const std::size_t o = std::size_t(r) * T;
    double m = -1e300, sum = 0, pd = 0;
    for (int j = 0; j <= t; ++j) m = std::max(m, hs[o + j]);
    for (int j = 0; j <= t; ++j) sum += std::exp(hs[o + j] - m);
    for (int j = 0; j <= t; ++j) ref[o + j] = std::exp(hs[o + j] - m) / sum;
    for (int j = 0; j <= t; ++j) pd += got[o + j] * hdp[o + j];
    for (int j = 0; j <= t; ++j) rds[o + j] = got[o + j] * (hdp[o + j] - pd);
  }
}

TEST(Bf16Kernels, SoftmaxToBf16ProbabilitiesMatchesReference) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int B = 2, H = 3, T = 33;
  View<float****> scores("scores", B, H, T, T), ds("ds", B, H, T, T), dp("dp", B, H, T, T);
  View<bf16****> p("p", B, H, T, T);
  const Vec hs = ktest::fill_random(scores, rng, -4, 4), hdp = ktest::fill_random(dp, rng);
  kk::causal_softmax_forward(Exec(), p, View<const float****>(scores));
  kk::causal_softmax_backward(Exec(), ds, View<const float****>(dp), p);
  Kokkos::fence();
  const Vec got = ktest::to_host(p), gds = ktest::to_host(ds);
  Vec ref, rds;
  causal_softmax_reference(hs, hdp, got, B * H * T, T, ref, rds);
  EXPECT_LT(ktest::rel_err(got, ref), kBf16Tol);
  EXPECT_LT(ktest::rel_err(gds, rds), kF32Tol);
}

// batched_gemm in bf16: the scores arrive in bf16 and become the probabilities in place, and dP
// arrives in bf16 and becomes d(scores) in place. Each against float64 on the same bf16 inputs:
// one bf16 rounding of each output (an element read after its row's first write fails).
TEST(Bf16Kernels, SoftmaxInPlaceOnBf16ScoresMatchesReference) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int B = 2, H = 3, T = 33;
  View<bf16****> sp("scores_then_probs", B, H, T, T), dd("dp_then_ds", B, H, T, T);
  const Vec hs = ktest::fill_random(sp, rng, -4, 4), hdp = ktest::fill_random(dd, rng);
  kk::causal_softmax_forward(Exec(), sp, View<const bf16****>(sp));
  kk::causal_softmax_backward(Exec(), dd, View<const bf16****>(dd), sp);
  Kokkos::fence();
  const Vec got = ktest::to_host(sp), gds = ktest::to_host(dd);
  Vec ref, rds;
  causal_softmax_reference(hs, hdp, got, B * H * T, T, ref, rds);
  EXPECT_LT(ktest::rel_err(got, ref), kBf16Tol);
  EXPECT_LT(ktest::rel_err(gds, rds), kBf16Tol);
  for (int r = 0; r < B * H * T; ++r)  // zeros above the diagonal, in both
    for (int j = r % T + 1; j < T; ++j) {
      ASSERT_EQ(got[std::size_t(r) * T + j], 0.0);
      ASSERT_EQ(gds[std::size_t(r) * T + j], 0.0);
    }
}

TEST(Bf16Kernels, AttentionOnBf16MatchesReference) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const ktest::ref::AttnShape s : {ktest::ref::AttnShape{1, 7, 4, 4, 20}, {2, 70, 4, 2, 12}, {1, 130, 4, 1, 16}}) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " KV=" + std::to_string(s.KV));
    Vec hqkv, hdout;
    auto qkv = twin(rng, hqkv, -2, 2, std::size_t(s.B) * s.T * s.W());
    auto dout = twin(rng, hdout, -1, 1, std::size_t(s.B) * s.T * s.H * s.hd);
    const View<bf16***> Q(qkv.second.data(), s.B, s.T, s.W()), D(dout.second.data(), s.B, s.T, s.H * s.hd);
    const Vec ref_out = ktest::ref::attention_forward(hqkv, s);
    // batched_gemm twice: its default host blocks, then blocks of 9 rows (many, a partial last one)
    for (const int variant : {0, 1, 2, 3}) {
      const auto kind = variant == 0 ? kk::AttentionKind::naive
                        : variant == 1 ? kk::AttentionKind::fused
                                       : kk::AttentionKind::batched_gemm;
      if (kind == kk::AttentionKind::batched_gemm && !kk::gemm_vendor_available<Exec>()) continue;  // no BLAS built
      SCOPED_TRACE(variant == 0   ? "naive"
                   : variant == 1 ? "fused"
                   : variant == 2 ? "batched_gemm"
                                  : "batched_gemm, blocks of 9");
      const int saved_rows = kk::detail::causal_block_rows();
      if (variant == 3) kk::detail::causal_block_rows() = 9;
      auto st = kk::make_typed_attention_state<Exec, bf16>(kind, s.B, s.T, s.H);
      View<bf16***> out("out", s.B, s.T, s.H * s.hd), dqkv("dqkv", s.B, s.T, s.W());
      ktest::poison(out);
      ktest::poison(dqkv);
      kk::attention_forward(Exec(), out, st, Q, s.H, s.KV);
      kk::attention_backward(Exec(), dqkv, st, D, Q, out, s.H, s.KV);
      Kokkos::fence();
      const Vec hout = ktest::to_host(out), hdq = ktest::to_host(dqkv);
      EXPECT_LT(ktest::rel_err(hout, ref_out), 2 * kBf16Tol);
      // The backward's reference: the exact gradient of the exact inputs; bf16 probabilities
      // (naive, batched_gemm), the rounded output in delta (fused) or batched_gemm's d(scores)
      // rounded to bf16 for its products (one more rounding, relative 2^-9 per element) add a
      // few roundings' worth.
      EXPECT_LT(ktest::rel_err(hdq, ktest::ref::attention_backward(hqkv, hdout, s)), 4 * kBf16Tol);
      kk::attention_backward(Exec(), dqkv, st, D, Q, out, s.H, s.KV);
      Kokkos::fence();
      ktest::expect_bitwise_equal(hdq, ktest::to_host(dqkv), "bf16 dqkv run to run");
      kk::detail::causal_block_rows() = saved_rows;
    }
  }
}

}  // namespace
