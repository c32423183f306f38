// kernels.attention=vendor, cuDNN's flash attention. Where it runs (Kokkos::Cuda in a build with
// cuDNN): the output, the row logsumexp and each gradient (dQ, dK, dV) on bf16 inputs against the
// float64 reference of those exact inputs and against the naive kernel, within what bf16 rounding
// allows, at head sizes 64 and 128, with GQA, T near 1024 and odd T. Everywhere: where it cannot
// run (a host backend, fp32 activations) asking for it is refused with std::invalid_argument.
#include "attention.hpp"
#include "kernel_test_util.hpp"
#include "reference_attention.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <tuple>

namespace {

using ktest::Exec;
using ktest::View;
using ktest::ref::AttnShape;
namespace kk = kformer::kernels;
using kk::bf16;
using Vec = std::vector<double>;

// A bf16 output's norm-wise error: one rounding to nearest, at most 2^-8 relative per element,
// plus fp32 noise (as test_bf16_kernels.cpp states it). The output gets twice that and the
// gradients four times, as there: cuDNN rounds the probabilities to bf16 before P V and P^T dO,
// and d(scores) before the products that give dQ and dK, one more rounding each (2^-9 relative
// per element), and its backward reads the rounded output.
constexpr double kBf16Tol = 4e-3;
constexpr double kOutTol = 2 * kBf16Tol, kGradTol = 4 * kBf16Tol;
// The logsumexp is fp32 arithmetic on bf16-exact inputs (tensor-core products are exact).
constexpr double kLseTol = 1e-4;

std::string describe(const AttnShape& s) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
         " KV=" + std::to_string(s.KV) + " hd=" + std::to_string(s.hd);
}

// Columns [c0, c1) of every token of a (B,T,W) host array: dQ, dK or dV out of dqkv.
Vec columns(const Vec& x, const AttnShape& s, int c0, int c1) {
  Vec r;
  r.reserve(std::size_t(s.B) * s.T * (c1 - c0));
  for (int b = 0; b < s.B; ++b)
    for (int t = 0; t < s.T; ++t)
      for (int c = c0; c < c1; ++c) r.push_back(x[s.at(b, t, c)]);
  return r;
}

// log sum_{j<=t} exp(q_t . k_j / sqrt(hd)) per (b, h, t), the row statistic cuDNN keeps.
Vec reference_lse(const Vec& qkv, const AttnShape& s) {
  const double scale = 1 / std::sqrt(double(s.hd));
  Vec lse(std::size_t(s.B) * s.H * s.T);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < s.T; ++t) {
        Vec sc(t + 1);
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int d = 0; d < s.hd; ++d) dot += qkv[s.at(b, t, s.q(h) + d)] * qkv[s.at(b, j, s.k(h) + d)];
          sc[j] = dot * scale;
        }
        const double m = *std::max_element(sc.begin(), sc.end());
        double sum = 0;
        for (const double e : sc) sum += std::exp(e - m);
        lse[(std::size_t(b) * s.H + h) * s.T + t] = m + std::log(sum);
      }
  return lse;
}

struct Result {
  Vec out, lse, dqkv, dqkv_again;
};

// One forward and two backwards of `kind` on bf16 activations, into poisoned outputs.
Result run(kk::AttentionKind kind, const AttnShape& s, const View<bf16***>& qkv, const View<bf16***>& dout) {
  auto st = kk::make_typed_attention_state<Exec, bf16>(kind, s.B, s.T, s.H);
  View<bf16***> out("out", s.B, s.T, s.H * s.hd), dqkv("dqkv", s.B, s.T, s.W());
  ktest::poison(out);
  ktest::poison(dqkv);
  if (st.lse.data()) ktest::poison(st.lse);
  kk::attention_forward(Exec(), out, st, qkv, s.H, s.KV);
  kk::attention_backward(Exec(), dqkv, st, dout, qkv, out, s.H, s.KV);
  Kokkos::fence();
  Result r{ktest::to_host(out), st.lse.data() ? ktest::to_host(st.lse) : Vec{}, ktest::to_host(dqkv), {}};
  ktest::poison(dqkv);
  kk::attention_backward(Exec(), dqkv, st, dout, qkv, out, s.H, s.KV);
  Kokkos::fence();
  r.dqkv_again = ktest::to_host(dqkv);
  return r;
}

void compare(const AttnShape& s, const Vec& hqkv, const Vec& hdout, const View<bf16***>& qkv,
             const View<bf16***>& dout) {
  const Result v = run(kk::AttentionKind::vendor, s, qkv, dout);
  const Result naive = run(kk::AttentionKind::naive, s, qkv, dout);
  const Vec ref_dqkv = ktest::ref::attention_backward(hqkv, hdout, s);
  const Vec ref_out = ktest::ref::attention_forward(hqkv, s);
  EXPECT_LT(ktest::rel_err(v.out, ref_out), kOutTol);
  EXPECT_LT(ktest::rel_err(v.out, naive.out), 2 * kOutTol);  // each within kOutTol of the reference
  EXPECT_LT(ktest::rel_err(v.lse, reference_lse(hqkv, s)), kLseTol);
  const int q0 = 0, k0 = s.H * s.hd, v0 = (s.H + s.KV) * s.hd, w = s.W();
  const struct {
    const char* name;
    int c0, c1;
  } parts[] = {{"dQ", q0, k0}, {"dK", k0, v0}, {"dV", v0, w}};
  for (const auto& p : parts) {
    SCOPED_TRACE(p.name);
    const Vec got = columns(v.dqkv, s, p.c0, p.c1);
    EXPECT_LT(ktest::rel_err(got, columns(ref_dqkv, s, p.c0, p.c1)), kGradTol);
    EXPECT_LT(ktest::rel_err(got, columns(naive.dqkv, s, p.c0, p.c1)), 2 * kGradTol);
  }
  // cuDNN's default backward may sum dQ with atomics (its deterministic algorithm keeps a
  // (B,H,T,T) workspace on Hopper): two runs agree within a rounding, not always bit for bit.
  const double again = ktest::rel_err(v.dqkv_again, v.dqkv);
  EXPECT_LT(again, kBf16Tol);
  std::cout << "[ vendor   ] " << describe(s) << ": backward run to run "
            << (again == 0 ? "bitwise equal" : "differs by " + std::to_string(again)) << "\n";
}

TEST(AttentionVendor, MatchesReferenceAndNaiveOnBf16) {
  if (!kk::attention_vendor_available<Exec>()) GTEST_SKIP() << "no cuDNN attention on " << Exec::name();
  std::mt19937_64 rng(ktest::fresh_seed());
  // Head sizes 64 and 128, GQA ratios 1 to 4, T near 1024, odd T and T = 2 (cuDNN's backward
  // refuses T = 1).
  for (const AttnShape s : {AttnShape{2, 1024, 8, 2, 64}, AttnShape{1, 1027, 4, 4, 128}, AttnShape{2, 129, 6, 3, 64},
                            AttnShape{1, 333, 8, 2, 128}, AttnShape{3, 2, 4, 1, 64}}) {
    SCOPED_TRACE(describe(s));
    Vec hqkv, hdout;
    View<bf16***> qkv("qkv", s.B, s.T, s.W()), dout("dout", s.B, s.T, s.H * s.hd);
    hqkv = ktest::fill_random(qkv, rng, -2, 2);  // bf16-exact: the reference sees what the kernels see
    hdout = ktest::fill_random(dout, rng, -1, 1);
    try {  // a shape cuDNN refuses fails the test and the next shape still runs
      compare(s, hqkv, hdout, qkv, dout);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// Attention with the causal mask dropped (every key of the sequence): a planted fault's output.
Vec unmasked_forward(const Vec& qkv, const AttnShape& s) {
  Vec out(std::size_t(s.B) * s.T * s.H * s.hd, 0.0);
  const double scale = 1 / std::sqrt(double(s.hd));
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int t = 0; t < s.T; ++t) {
        Vec p(s.T);
        double mx = -1e300, sum = 0;
        for (int t2 = 0; t2 < s.T; ++t2) {
          double dot = 0;
          for (int d = 0; d < s.hd; ++d) dot += qkv[s.at(b, t, s.q(h) + d)] * qkv[s.at(b, t2, s.k(h) + d)];
          mx = std::max(mx, p[t2] = dot * scale);
        }
        for (double& e : p) sum += (e = std::exp(e - mx));
        for (int t2 = 0; t2 < s.T; ++t2)
          for (int d = 0; d < s.hd; ++d) out[s.out_at(b, t, h) + d] += p[t2] / sum * qkv[s.at(b, t2, s.v(h) + d)];
      }
  return out;
}

// The comparison above can fail: on inputs drawn as there, the attention of a kernel with a planted
// fault (the causal mask dropped, or the scores scaled by 2/sqrt(hd)) lies several of its
// tolerances from the float64 reference, in the output and in every gradient. Host arithmetic
// only, so it runs on every backend (the kernel's own comparison needs cuDNN).
TEST(AttentionVendor, PlantedFaultsLieOutsideItsTolerances) {
  std::mt19937_64 rng(ktest::fresh_seed());
  std::uniform_real_distribution<double> u(-2, 2), g(-1, 1);
  for (const AttnShape s : {AttnShape{1, 129, 4, 2, 64}, AttnShape{1, 65, 2, 1, 128}}) {
    SCOPED_TRACE(describe(s));
    Vec qkv(std::size_t(s.B) * s.T * s.W()), dout(std::size_t(s.B) * s.T * s.H * s.hd);
    for (double& x : qkv) x = u(rng);
    for (double& x : dout) x = g(rng);
    const Vec out = ktest::ref::attention_forward(qkv, s), dqkv = ktest::ref::attention_backward(qkv, dout, s);
    EXPECT_GT(ktest::rel_err(unmasked_forward(qkv, s), out), 5 * kOutTol) << "the causal mask dropped";
    Vec doubled = qkv;  // q scaled by 2: the scores' scale 2/sqrt(hd)
    for (int b = 0; b < s.B; ++b)
      for (int t = 0; t < s.T; ++t)
        for (int c = 0; c < s.H * s.hd; ++c) doubled[s.at(b, t, c)] *= 2;
    EXPECT_GT(ktest::rel_err(ktest::ref::attention_forward(doubled, s), out), 5 * kOutTol) << "the scale doubled";
    const Vec wrong = ktest::ref::attention_backward(doubled, dout, s);
    const int q0 = 0, k0 = s.H * s.hd, v0 = (s.H + s.KV) * s.hd;
    for (const auto& [name, c0, c1] : {std::tuple<const char*, int, int>{"dQ", q0, k0}, {"dK", k0, v0}, {"dV", v0, s.W()}})
      EXPECT_GT(ktest::rel_err(columns(wrong, s, c0, c1), columns(dqkv, s, c0, c1)), 5 * kGradTol)
          << name << " with the scale doubled";
  }
}

TEST(AttentionVendor, RefusedWhereItDoesNotRun) {
  const AttnShape s{1, 8, 4, 2, 64};
  auto state = kk::make_attention_state<Exec>(kk::AttentionKind::vendor, s.B, s.T, s.H);
  // Saved as fused's: the logsumexp, never the probabilities.
  EXPECT_EQ(state.att.data(), nullptr);
  EXPECT_EQ(state.lse.extent(0) * state.lse.extent(1) * state.lse.extent(2), std::size_t(s.B * s.H * s.T));
  EXPECT_EQ(kk::attention_kind_from_string("vendor"), kk::AttentionKind::vendor);
  // fp32 activations: refused on every backend.
  View<float***> qkv("qkv", s.B, s.T, s.W()), out("out", s.B, s.T, s.H * s.hd), dqkv("dqkv", s.B, s.T, s.W());
  EXPECT_THROW(kk::attention_forward(Exec(), out, state, qkv, s.H, s.KV), std::invalid_argument);
  EXPECT_THROW(kk::attention_backward(Exec(), dqkv, state, out, qkv, out, s.H, s.KV), std::invalid_argument);
  // bf16 activations: refused off CUDA; under CUDA without cuDNN the kernel says how to get it.
  kk::AttentionState<Exec, bf16> st16;
  st16.kind = kk::AttentionKind::vendor;
  st16.lse = state.lse;
  View<bf16***> q16("q16", s.B, s.T, s.W()), o16("o16", s.B, s.T, s.H * s.hd), d16("d16", s.B, s.T, s.W());
  if (kk::detail::is_cuda_space<Exec>()) {
    if (!kk::attention_vendor_available<Exec>())
      EXPECT_THROW(kk::attention_forward(Exec(), o16, st16, q16, s.H, s.KV), std::runtime_error);
    else {
      // Shapes that do not fit are refused before cuDNN sees them; one cuDNN refuses (head size
      // 12: it wants a multiple of 8) with the shape and its reason.
      EXPECT_THROW(kk::attention_forward(Exec(), o16, st16, q16, 3, 2), std::invalid_argument);
      const AttnShape odd{1, 8, 2, 1, 12};
      View<bf16***> qo("qo", odd.B, odd.T, odd.W()), oo("oo", odd.B, odd.T, odd.H * odd.hd);
      kk::AttentionState<Exec, bf16> so;
      so.kind = kk::AttentionKind::vendor;
      so.lse = View<float***>("lse", odd.B, odd.H, odd.T);
      try {
        kk::attention_forward(Exec(), oo, so, qo, odd.H, odd.KV);
        ADD_FAILURE() << "cuDNN ran head size 12";
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("hd=12"), std::string::npos) << e.what();
      }
    }
  } else {
    EXPECT_THROW(kk::attention_forward(Exec(), o16, st16, q16, s.H, s.KV), std::invalid_argument);
    EXPECT_THROW(kk::attention_backward(Exec(), d16, st16, o16, q16, o16, s.H, s.KV), std::invalid_argument);
    try {
      kk::attention_forward(Exec(), o16, st16, q16, s.H, s.KV);
    } catch (const std::invalid_argument& e) {  // one line that names the key and the cause
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos);
      EXPECT_NE(what.find("kernels.attention=vendor"), std::string::npos) << what;
    }
  }
}

}  // namespace
