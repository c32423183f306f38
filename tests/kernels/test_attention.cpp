// Causal GQA attention, naive, fused and batched_gemm (where the build has a vendor BLAS):
// forward and backward against the float64 reference, the variants against each other, the reference backward against finite differences,
// bitwise determinism of both backwards, and the shape checks.
#include "attention.hpp"
#include "finite_diff.hpp"
#include "kernel_test_util.hpp"
#include "reference_attention.hpp"

namespace {

using ktest::Exec;
using ktest::View;
using ktest::ref::AttnShape;
namespace kk = kformer::kernels;

std::string describe(const AttnShape& s) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
         " KV=" + std::to_string(s.KV) + " hd=" + std::to_string(s.hd);
}

// Fixed shapes (T=1, head_dim 12 and 20, GQA ratios 1, 2, 4, T across several host and device
// tiles and not a multiple of either) and two random ones.
std::vector<AttnShape> shapes(std::mt19937_64& rng) {
  std::vector<AttnShape> s = {{1, 1, 2, 1, 12}, {2, 7, 4, 4, 20}, {1, 65, 4, 2, 12},
                              {2, 130, 4, 1, 20}, {1, 17, 3, 3, 6}, {1, 40, 8, 2, 16}};
  std::uniform_int_distribution<int> T(1, 150), pick(0, 3), kv(1, 2);
  const int hds[] = {4, 12, 20, 32}, ratios[] = {1, 2, 4, 1};
  for (int i = 0; i < 2; ++i) {
    const int KV = kv(rng);
    s.push_back({1 + i, T(rng), KV * ratios[pick(rng)], KV, hds[pick(rng)]});
  }
  return s;
}

// Runs one variant's forward and backward on poisoned outputs; returns out and dqkv, and
// checks that a second backward gives the same bits.
struct Result {
  std::vector<double> out, dqkv;
};
Result run(kk::AttentionKind kind, const AttnShape& s, const View<float***>& qkv, const View<float***>& dout) {
  View<float***> out("out", s.B, s.T, s.H * s.hd), dqkv("dqkv", s.B, s.T, s.W());
  auto state = kk::make_attention_state<Exec>(kind, s.B, s.T, s.H);
  for (auto v : {out, dqkv}) ktest::poison(v);
  if (state.att.data()) ktest::poison(state.att);
  if (state.lse.data()) ktest::poison(state.lse);
  kk::attention_forward(Exec(), out, state, qkv, s.H, s.KV);
  kk::attention_backward(Exec(), dqkv, state, dout, qkv, out, s.H, s.KV);
  Result r{ktest::to_host(out), ktest::to_host(dqkv)};
  ktest::poison(dqkv);
  kk::attention_backward(Exec(), dqkv, state, dout, qkv, out, s.H, s.KV);
  ktest::expect_bitwise_equal(r.dqkv, ktest::to_host(dqkv), "dqkv run to run");
  return r;
}

TEST(Attention, KindsMatchReferenceAndEachOther) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const AttnShape& s : shapes(rng)) {
    SCOPED_TRACE(describe(s));
    View<float***> qkv("qkv", s.B, s.T, s.W()), dout("dout", s.B, s.T, s.H * s.hd);
    const auto hqkv = ktest::fill_random(qkv, rng, -2, 2), hdout = ktest::fill_random(dout, rng);
    const auto ref_out = ktest::ref::attention_forward(hqkv, s);
    const auto ref_dqkv = ktest::ref::attention_backward(hqkv, hdout, s);
    const Result naive = run(kk::AttentionKind::naive, s, qkv, dout);
    const Result fused = run(kk::AttentionKind::fused, s, qkv, dout);
    EXPECT_LT(ktest::rel_err(naive.out, ref_out), 1e-5);
    EXPECT_LT(ktest::rel_err(naive.dqkv, ref_dqkv), 1e-5);
    EXPECT_LT(ktest::rel_err(fused.out, ref_out), 1e-5);
    EXPECT_LT(ktest::rel_err(fused.dqkv, ref_dqkv), 1e-5);
    EXPECT_LT(ktest::rel_err(fused.out, naive.out), 1e-5);
    EXPECT_LT(ktest::rel_err(fused.dqkv, naive.dqkv), 1e-5);
    if (kk::gemm_vendor_available<Exec>()) {  // batched_gemm: the vendor BLAS (OpenBLAS, cuBLAS)
      SCOPED_TRACE("batched_gemm");
      const Result batched = run(kk::AttentionKind::batched_gemm, s, qkv, dout);
      EXPECT_LT(ktest::rel_err(batched.out, ref_out), 1e-5);
      EXPECT_LT(ktest::rel_err(batched.dqkv, ref_dqkv), 1e-5);
      // The host's causal blocks, small: many blocks and a partial last one (on a GPU, whole).
      const int saved = kk::detail::causal_block_rows();
      kk::detail::causal_block_rows() = 7;
      const Result blocked = run(kk::AttentionKind::batched_gemm, s, qkv, dout);
      kk::detail::causal_block_rows() = saved;
      EXPECT_LT(ktest::rel_err(blocked.out, ref_out), 1e-5) << "blocks of 7 rows";
      EXPECT_LT(ktest::rel_err(blocked.dqkv, ref_dqkv), 1e-5) << "blocks of 7 rows";
    }
  }
}

TEST(Attention, ReferenceBackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(ktest::fresh_seed());
  std::uniform_real_distribution<double> u(-2, 2);
  for (const AttnShape s : {AttnShape{1, 5, 4, 2, 3}, AttnShape{2, 3, 4, 1, 2}, AttnShape{1, 4, 2, 2, 4}}) {
    SCOPED_TRACE(describe(s));
    std::vector<double> qkv(std::size_t(s.B) * s.T * s.W()), w(std::size_t(s.B) * s.T * s.H * s.hd);
    for (auto* v : {&qkv, &w})
      for (double& e : *v) e = u(rng);
    const auto f = [&](const std::vector<double>& x) { return ktest::ref::attention_forward(x, s); };
    EXPECT_LT(ktest::rel_err(ktest::ref::attention_backward(qkv, w, s), ktest::numeric_grad(f, qkv, w)), 1e-6);
  }
}

TEST(Attention, RejectsShapesThatDoNotFit) {
  View<float***> qkv("qkv", 1, 4, 5 * 8), out("out", 1, 4, 3 * 8);
  auto state = kk::make_attention_state<Exec>(kk::AttentionKind::fused, 1, 4, 3);
  EXPECT_THROW(kk::attention_forward(Exec(), out, state, qkv, 3, 2), std::invalid_argument);  // 2 does not divide 3
  EXPECT_THROW(kk::attention_forward(Exec(), out, state, qkv, 4, 1), std::invalid_argument);  // 40 % 6 != 0
  EXPECT_THROW(kk::attention_kind_from_string("flash"), std::invalid_argument);
  EXPECT_EQ(kk::attention_kind_from_string("naive"), kk::AttentionKind::naive);
  EXPECT_EQ(kk::attention_kind_from_string("batched_gemm"), kk::AttentionKind::batched_gemm);
}

}  // namespace
