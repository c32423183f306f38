// Embedding, vocab-parallel cross-entropy, AdamW and the fused gradient norm's sum of squares
// against float64 host references (the row kernels in the host and the GPU work shape): the
// reference gradients checked by central differences, the kernels to 1e-5, poisoned outputs,
// bitwise run-to-run determinism, and a vocabulary split over "ranks" (reduced here on the host)
// that must equal the unsplit result.
#include <cmath>

#include "adamw.hpp"
#include "adamw_segments.hpp"
#include "cross_entropy.hpp"
#include "convert.hpp"
#include "embedding.hpp"
#include "sum_of_squares.hpp"
#include "finite_diff.hpp"
#include "kernel_test_util.hpp"

namespace kk = kformer::kernels;
using ktest::Exec;
using ktest::View;

namespace {

// float64 reference: per-row loss and dlogits of softmax cross-entropy over the first `vocab`
// of V columns (the rest masked), scaled by `scale`.
void ref_xent(const std::vector<double>& l, const std::vector<int>& tgt, int N, int V, int vocab, double scale,
              std::vector<double>& loss, std::vector<double>& dl) {
  loss.assign(N, 0);
  dl.assign(std::size_t(N) * V, 0);
  for (int n = 0; n < N; ++n) {
    double m = -1e300, s = 0;
    for (int j = 0; j < vocab; ++j) m = std::max(m, l[n * V + j]);
    for (int j = 0; j < vocab; ++j) s += std::exp(l[n * V + j] - m);
    loss[n] = std::log(s) + m - l[n * V + tgt[n]];
    for (int j = 0; j < vocab; ++j) dl[n * V + j] = (std::exp(l[n * V + j] - m) / s - (j == tgt[n])) * scale;
  }
}

View<std::int32_t*> device_ints(const std::vector<int>& v) {
  View<std::int32_t*> d("ints", v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (std::size_t i = 0; i < v.size(); ++i) h(i) = v[i];
  Kokkos::deep_copy(d, h);
  return d;
}

}  // namespace

TEST(CrossEntropy, ReferenceGradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int N = 3, V = 7, vocab = 5;
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<double> l(N * V);
  for (auto& x : l) x = u(rng);
  const std::vector<int> tgt = {0, 4, 2};
  std::vector<double> loss, dl;
  ref_xent(l, tgt, N, V, vocab, 1.0, loss, dl);
  const auto f = [&](const std::vector<double>& x) {
    std::vector<double> lo, d;
    ref_xent(x, tgt, N, V, vocab, 1.0, lo, d);
    return lo;
  };
  const auto num = ktest::numeric_grad(f, l, std::vector<double>(N, 1.0));
  EXPECT_LT(ktest::rel_err(dl, num), 1e-7);
}

TEST(CrossEntropy, MatchesReferenceWholeAndSplitOverVocabularyShards) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const auto& c : {std::tuple{1, 5, 1}, {17, 100, 1}, {9, 61, 2}, {13, 250, 4}}) {
    const int N = std::get<0>(c), vocab = std::get<1>(c), shards = std::get<2>(c);  // the lambda captures them
    const int Vp = (vocab + 64 * shards - 1) / (64 * shards) * (64 * shards), Vl = Vp / shards;
    const float scale = 1.f / N;
    std::vector<int> tgt(N);
    for (auto& t : tgt) t = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
    auto targets = device_ints(tgt);
    View<float**> full("logits", N, Vp);
    auto lref = ktest::fill_random(full, rng, -3, 3);
    std::vector<double> loss_ref, dl_ref;
    ref_xent(lref, tgt, N, Vp, vocab, scale, loss_ref, dl_ref);
    ktest::for_each_shape([&](auto shape) {
      constexpr kk::Shape Sh = decltype(shape)::value;
      // Each shard's passes, with the TP reductions done on the host between them.
      std::vector<View<float**>> lg(shards);
      std::vector<double> M(N, -INFINITY), S(N, 0), Z(N, 0);
      for (int r = 0; r < shards; ++r) {
        lg[r] = View<float**>("shard", N, Vl);
        Kokkos::deep_copy(lg[r], Kokkos::subview(full, Kokkos::ALL(), std::make_pair(r * Vl, (r + 1) * Vl)));
        View<float*> m("m", N);
        ktest::poison(m);
        kk::xent_local_max<Sh>(Exec(), m, lg[r], r * Vl, vocab);
        auto mh = ktest::to_host(m);
        for (int n = 0; n < N; ++n) M[n] = std::max(M[n], mh[n]);
      }
      View<float*> gmax("gmax", N);
      auto gh = Kokkos::create_mirror_view(gmax);
      for (int n = 0; n < N; ++n) gh(n) = float(M[n]);
      Kokkos::deep_copy(gmax, gh);
      for (int r = 0; r < shards; ++r) {
        View<float**> st("st", 2, N);
        ktest::poison(st);
        kk::xent_local_sums<Sh>(Exec(), st, lg[r], targets, gmax, r * Vl, vocab);
        auto sh = ktest::to_host(st);
        for (int n = 0; n < N; ++n) S[n] += sh[n], Z[n] += sh[N + n];
      }
      View<float**> stats("stats", 2, N);
      auto sth = Kokkos::create_mirror_view(stats);
      for (int n = 0; n < N; ++n) sth(0, n) = float(S[n]), sth(1, n) = float(Z[n]);
      Kokkos::deep_copy(stats, sth);
      std::vector<double> dl_all(std::size_t(N) * Vp);
      for (int r = 0; r < shards; ++r) {
        View<float*> loss("loss", N);
        View<float**> dl("dl", N, Vl);
        ktest::poison(loss);
        ktest::poison(dl);
        kk::xent_finish<Sh>(Exec(), loss, dl, lg[r], targets, gmax, stats, r * Vl, vocab, scale);
        EXPECT_LT(ktest::rel_err(ktest::to_host(loss), loss_ref), 1e-5) << "N=" << N << " shard " << r;
        auto d = ktest::to_host(dl);
        for (int n = 0; n < N; ++n)
          for (int j = 0; j < Vl; ++j) dl_all[std::size_t(n) * Vp + r * Vl + j] = d[std::size_t(n) * Vl + j];
      }
      EXPECT_LT(ktest::rel_err(dl_all, dl_ref), 1e-5) << "N=" << N << " vocab=" << vocab << " shards=" << shards;
    });
  }
}

TEST(CrossEntropy, InPlaceGradientAndOneRankPath) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int N = 6, V = 64, vocab = 50;
  std::vector<int> tgt = {1, 49, 0, 7, 7, 30};
  View<float**> lg("lg", N, V);
  auto l = ktest::fill_random(lg, rng, -4, 4);
  std::vector<double> loss_ref, dl_ref;
  ref_xent(l, tgt, N, V, vocab, 0.5, loss_ref, dl_ref);
  View<float*> loss("loss", N);
  ktest::poison(loss);
  kk::xent_forward_backward(Exec(), loss, lg, lg, device_ints(tgt), vocab, 0.5f);
  EXPECT_LT(ktest::rel_err(ktest::to_host(loss), loss_ref), 1e-5);
  EXPECT_LT(ktest::rel_err(ktest::to_host(lg), dl_ref), 1e-5);
}

// One rank's single pass (xent_whole_rows) against the reference, and against the three passes it
// replaces: bit for bit in the host shape where a team is one thread (the host); the GPU shape finds
// the maximum and the sum in one read (online), so within rounding of them. In place, into another
// view, and into a bf16 gradient (each element the fp32 one rounded). Rows wider than a block of 16
// lanes and a padded tail; a target on the last valid entry; a row whose maximum comes last and one
// whose logits rise all the way (the online sum rescaled at every entry).
TEST(CrossEntropy, WholeRowsPassMatchesReferenceAndTheThreePasses) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int N = 5, V = 192, vocab = 181;
  const std::vector<int> tgt = {0, 180, 57, 57, 93};
  const auto targets = device_ints(tgt);
  View<float**> lg("lg", N, V);
  auto l = ktest::fill_random(lg, rng, -6, 6);
  {
    auto h = Kokkos::create_mirror_view(lg);
    Kokkos::deep_copy(h, lg);
    h(1, vocab - 1) = 9.f;                                  // row 1: its maximum the last valid entry
    for (int j = 0; j < V; ++j) h(3, j) = -5.f + 0.05f * j;  // row 3: rising
    Kokkos::deep_copy(lg, h);
    for (int j = 0; j < V; ++j) l[1 * V + j] = h(1, j), l[3 * V + j] = h(3, j);
  }
  std::vector<double> loss_ref, dl_ref;
  ref_xent(l, tgt, N, V, vocab, 0.25, loss_ref, dl_ref);
  ktest::for_each_shape([&](auto shape) {
    constexpr kk::Shape Sh = decltype(shape)::value;
    View<float*> m("m", N), loss3("loss3", N), loss("loss", N);
    View<float**> st("st", 2, N), dl3("dl3", N, V), dl("dl", N, V), inplace("inplace", N, V);
    View<kk::bf16**> dl16("dl16", N, V);
    kk::xent_local_max<Sh>(Exec(), m, lg, 0, vocab);
    kk::xent_local_sums<Sh>(Exec(), st, lg, targets, m, 0, vocab);
    kk::xent_finish<Sh>(Exec(), loss3, dl3, lg, targets, m, st, 0, vocab, 0.25f);
    for (const auto& v : {loss, m}) ktest::poison(v);
    for (const auto& v : {dl, inplace}) ktest::poison(v);
    kk::xent_whole_rows<Sh>(Exec(), loss, dl, lg, targets, vocab, 0.25f);
    EXPECT_LT(ktest::rel_err(ktest::to_host(loss), loss_ref), 1e-5);
    EXPECT_LT(ktest::rel_err(ktest::to_host(dl), dl_ref), 1e-5);
    if constexpr (kk::runs_on_host<Exec> && Sh == kk::Shape::host) {
      ktest::expect_bitwise_equal(ktest::to_host(loss), ktest::to_host(loss3), "loss: one pass and three");
      ktest::expect_bitwise_equal(ktest::to_host(dl), ktest::to_host(dl3), "dlogits: one pass and three");
    }
    EXPECT_LT(ktest::rel_err(ktest::to_host(loss), ktest::to_host(loss3)), 1e-6) << "one pass and three";
    EXPECT_LT(ktest::rel_err(ktest::to_host(dl), ktest::to_host(dl3)), 1e-6) << "one pass and three";
    Kokkos::deep_copy(inplace, lg);
    kk::xent_whole_rows<Sh>(Exec(), loss, inplace, inplace, targets, vocab, 0.25f);
    ktest::expect_bitwise_equal(ktest::to_host(inplace), ktest::to_host(dl), "in place and into another view");
    kk::xent_whole_rows<Sh>(Exec(), loss, dl16, lg, targets, vocab, 0.25f);
    const auto d16 = ktest::to_host(dl16), d32 = ktest::to_host(dl);
    for (std::size_t i = 0; i < d16.size(); ++i)
      ASSERT_EQ(d16[i], double(kk::round_to_bf16(float(d32[i])))) << "element " << i;
  });
}

TEST(Embedding, ForwardBackwardAgainstReferenceAndDeterministic) {
  std::mt19937_64 rng(ktest::fresh_seed());
  for (const auto& c : {std::tuple{1, 1, 3, 10, 0, 10}, {3, 7, 13, 50, 0, 50}, {2, 9, 20, 64, 32, 32}}) {
    const int B = std::get<0>(c), T = std::get<1>(c), C = std::get<2>(c), v0 = std::get<4>(c), Vl = std::get<5>(c);
    const int N = B * T;
    std::vector<int> tok(N);
    for (auto& t : tok) t = std::uniform_int_distribution<int>(0, 9)(rng) + (v0 ? 30 : 0);  // repeats, both shards
    View<float**> wte("wte", Vl, C), wpe("wpe", T + 2, C), out("out", N, C), dout("dout", N, C);
    auto wteh = ktest::fill_random(wte, rng), wpeh = ktest::fill_random(wpe, rng), douth = ktest::fill_random(dout, rng);
    ktest::for_each_shape([&](auto shape) {
      constexpr kk::Shape Sh = decltype(shape)::value;
      ktest::poison(out);
      kk::embedding_forward<Sh>(Exec(), out, device_ints(tok), wte, v0, wpe, T);
      std::vector<double> ref(std::size_t(N) * C), dwte_ref(std::size_t(Vl) * C, 0), dwpe_ref(std::size_t(T + 2) * C, 0);
      for (int n = 0; n < N; ++n)
        for (int c = 0; c < C; ++c) {
          const int r = tok[n] - v0;
          const bool held = r >= 0 && r < Vl;
          ref[n * C + c] = (held ? wteh[r * C + c] : 0) + wpeh[(n % T) * C + c];
          if (held) dwte_ref[r * C + c] += douth[n * C + c];
          dwpe_ref[(n % T) * C + c] += douth[n * C + c];
        }
      EXPECT_LT(ktest::rel_err(ktest::to_host(out), ref), 1e-6);
      std::vector<std::int32_t> tok32(tok.begin(), tok.end());
      View<std::int32_t*> packed("token_index", kk::token_index_capacity(N));
      auto packed_host = Kokkos::create_mirror_view(packed);
      const auto idx = kk::make_token_index<Exec>(tok32.data(), N, v0, Vl, packed_host.data(), packed);
      Kokkos::deep_copy(packed, packed_host);
      std::vector<double> first;
      for (int run = 0; run < 2; ++run) {
        View<float**> dwte("dwte", Vl, C), dwpe("dwpe", T + 2, C);  // zero: the backward adds into them
        kk::embedding_backward<Sh>(Exec(), dwte, dout, idx);
        kk::position_embedding_backward<Sh>(Exec(), dwpe, dout, T);
        auto got = ktest::to_host(dwte);
        EXPECT_LT(ktest::rel_err(got, dwte_ref), 1e-6);
        EXPECT_LT(ktest::rel_err(ktest::to_host(dwpe), dwpe_ref), 1e-6);
        if (run == 0) first = got;
        else ktest::expect_bitwise_equal(first, got, "embedding backward");
      }
    });
  }
}

// A bf16 model whose fp32 masters are optimizer shards (bf16 under ZeRO-1/2) embeds from bf16
// tables: the result is the sum of the rounded rows, in fp32.
TEST(Embedding, ForwardFromBf16Tables) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int B = 2, T = 9, C = 20, v0 = 32, Vl = 32, N = B * T;
  std::vector<int> tok(N);
  for (auto& t : tok) t = std::uniform_int_distribution<int>(0, 9)(rng) + 30;  // both sides of v0
  View<float**> wte("wte", Vl, C), wpe("wpe", T, C), out("out", N, C);
  auto wteh = ktest::fill_random(wte, rng), wpeh = ktest::fill_random(wpe, rng);
  View<kk::bf16**> wte16("wte16", Vl, C), wpe16("wpe16", T, C);
  kk::convert(Exec(), wte16, wte);
  kk::convert(Exec(), wpe16, wpe);
  ktest::for_each_shape([&](auto shape) {
    constexpr kk::Shape Sh = decltype(shape)::value;
    ktest::poison(out);
    kk::embedding_forward<Sh>(Exec(), out, device_ints(tok), wte16, v0, wpe16, T);
    std::vector<double> ref(std::size_t(N) * C);
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) {
        const int r = tok[n] - v0;
        const float e = r >= 0 && r < Vl ? kk::round_to_bf16(float(wteh[r * C + c])) : 0.f;
        ref[n * C + c] = double(e + kk::round_to_bf16(float(wpeh[(n % T) * C + c])));  // one fp32 sum
      }
    EXPECT_EQ(ktest::rel_err(ktest::to_host(out), ref), 0.0);
  });
}

TEST(AdamW, MatchesTorchsUpdateOverSteps) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int n = 37;
  View<float*> p("p", n), g("g", n), m("m", n), v("v", n);
  auto ph = ktest::fill_random(p, rng);
  std::vector<double> mh(n, 0), vh(n, 0);
  kk::AdamWHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 0.1f;
  h.grad_scale = 0.5f;
  for (int step = 1; step <= 3; ++step) {
    auto gh = ktest::fill_random(g, rng);
    h.step = step;
    kk::adamw_update(Exec(), p, g, m, v, h);
    for (int i = 0; i < n; ++i) {  // torch.optim.AdamW, in double
      const double gi = gh[i] * h.grad_scale;
      ph[i] *= 1 - double(h.lr) * h.weight_decay;
      mh[i] = 0.9 * mh[i] + 0.1 * gi;
      vh[i] = 0.95 * vh[i] + 0.05 * gi * gi;
      const double bc1 = 1 - std::pow(0.9, step), bc2 = 1 - std::pow(0.95, step);
      ph[i] -= h.lr / bc1 * mh[i] / (std::sqrt(vh[i]) / std::sqrt(bc2) + 1e-8);
    }
    EXPECT_LT(ktest::rel_err(ktest::to_host(p), ph), 1e-5) << "step " << step;
  }
}

// From a bf16 gradient buffer (parallel.grad_reduce_dtype=bf16) the update is the fp32 one of the
// same, widened values, bit for bit.
TEST(AdamW, ReadsBf16GradientsAsTheirWidenedValues) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int n = 41;
  View<float*> p("p", n), p2("p2", n), g("g", n), m("m", n), v("v", n), m2("m2", n), v2("v2", n);
  View<kk::bf16*> g16("g16", n);
  ktest::fill_random(p, rng);
  Kokkos::deep_copy(p2, p);
  kk::AdamWHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 0.1f;
  h.grad_scale = 0.7f;
  for (int step = 1; step <= 2; ++step) {
    ktest::fill_random(g, rng);
    kk::convert(Exec(), g16, g);
    kk::convert(Exec(), g, g16);  // g: the bf16 values, widened
    h.step = step;
    kk::adamw_update(Exec(), p, g, m, v, h);
    kk::adamw_update<Exec, kk::bf16>(Exec(), p2, g16, m2, v2, h);
    ktest::expect_bitwise_equal(ktest::to_host(p), ktest::to_host(p2), "adamw from bf16 gradients");
  }
}

// The one-launch update of many segments (adamw_segments.hpp) against adamw_update per segment,
// bit for bit, in both work shapes, from fp32 and bf16 gradients: segments longer than a block
// and ragged, one element long, at offsets that differ between the values, the gradient and the
// moments, with and without weight decay; elements outside every segment left alone.
template <class G>
void adamw_segments_match(std::mt19937_64& rng) {
  using Seg = kk::AdamWSegments<Exec>::Segment;
  constexpr std::int64_t B = kk::AdamWSegments<Exec>::kBlock;
  const std::vector<Seg> segs = {{3, 0, 0, 2 * B + 5, true}, {2 * B + 750, 2 * B + 5, 2 * B + 5, 1, false},
                                 {2 * B + 8, 2 * B + 9, 2 * B + 6, 700, true}, {2 * B + 800, 2 * B + 800, 2 * B + 706, 65, false}};
  const std::int64_t n = 2 * B + 900;
  View<float*> p("p", n), pref("pref", n), m("m", n), v("v", n), mref("mref", n), vref("vref", n), g32("g32", n);
  View<G*> g("g", n);
  ktest::fill_random(p, rng);
  Kokkos::deep_copy(pref, p);
  const kk::AdamWSegments<Exec> multi(segs);
  EXPECT_EQ(multi.elements(), 2 * B + 5 + 1 + 700 + 65);
  kk::AdamWHyper h;
  h.lr = 1e-2f, h.weight_decay = 0.1f, h.grad_scale = 0.7f;
  const auto sub = [](const auto& x, std::int64_t at, std::int64_t len) { return Kokkos::subview(x, std::make_pair(at, at + len)); };
  ktest::for_each_shape([&](auto shape) {
    constexpr kk::Shape S = decltype(shape)::value;
    for (int step = 1; step <= 2; ++step) {
      ktest::fill_random(g32, rng);
      kk::convert(Exec(), g, g32);
      h.step = step;
      multi.run<S>(Exec(), p.data(), g.data(), m.data(), v.data(), h);
      for (const Seg& s : segs) {
        kk::AdamWHyper hs = h;
        hs.weight_decay = s.decay ? h.weight_decay : 0.f;
        kk::adamw_update<Exec, G>(Exec(), sub(pref, s.value_offset, s.length), sub(g, s.grad_offset, s.length),
                                  sub(mref, s.state_offset, s.length), sub(vref, s.state_offset, s.length), hs);
      }
      Kokkos::fence();
      ktest::expect_bitwise_equal(ktest::to_host(p), ktest::to_host(pref), "values");
      ktest::expect_bitwise_equal(ktest::to_host(m), ktest::to_host(mref), "first moment");
      ktest::expect_bitwise_equal(ktest::to_host(v), ktest::to_host(vref), "second moment");
    }
  });
}

TEST(AdamW, SegmentsInOneLaunchAreTheUpdatePerSegment) {
  std::mt19937_64 rng(ktest::fresh_seed());
  {
    SCOPED_TRACE("fp32 gradients");
    adamw_segments_match<float>(rng);
  }
  {
    SCOPED_TRACE("bf16 gradients");
    adamw_segments_match<kk::bf16>(rng);
  }
}

// The loss of a step stays on the device: each call adds its sum (in double) to sums(0).
TEST(CrossEntropy, LossSumAccumulatesOnTheDevice) {
  std::mt19937_64 rng(ktest::fresh_seed());
  const int N = 37;
  View<float*> loss("loss", N);
  View<double*> sums("sums", 2);
  const auto h = ktest::fill_random(loss, rng, 0, 5);
  double ref = 0;
  for (double v : h) ref += v;
  kk::xent_loss_accumulate(Exec(), sums, View<const float*>(loss));
  kk::xent_loss_accumulate(Exec(), sums, View<const float*>(loss));
  EXPECT_NEAR(ktest::to_host(sums)[0], 2 * ref, 1e-12 * ref);
}

// The gradient norm's fused sum of squares over several ranges of one buffer (blocks of kBlock
// and a ragged last one, neighbouring and separate ranges, an empty one) against float64, in
// both work shapes; bitwise the same when run again.
TEST(SumOfSquares, FusedOverRangesMatchesReferenceAndIsDeterministic) {
  std::mt19937_64 rng(ktest::fresh_seed());
  using SoS = kk::SumOfSquares<Exec>;
  const std::int64_t n = 3 * SoS::kBlock + 777;
  View<float*> x("x", n);
  const auto h = ktest::fill_random(x, rng, -2, 2);
  const std::vector<std::pair<std::int64_t, std::int64_t>> ranges = {
      {0, 5}, {5, SoS::kBlock + 3}, {SoS::kBlock + 100, 0}, {2 * SoS::kBlock, SoS::kBlock + 700}, {n - 7, 7}};
  double ref = 0;
  for (const auto& r : ranges)
    for (std::int64_t i = r.first; i < r.first + r.second; ++i) ref += h[i] * h[i];
  const SoS sos(ranges);
  View<double*> out("out", 1);
  ktest::for_each_shape([&](auto shape) {
    constexpr kk::Shape Sh = decltype(shape)::value;
    ktest::poison(out);
    sos.run<Sh>(Exec(), x.data(), Kokkos::subview(out, 0));
    const double got = ktest::to_host(out)[0];
    EXPECT_NEAR(got, ref, 1e-12 * ref);
    sos.run<Sh>(Exec(), x.data(), Kokkos::subview(out, 0));
    ktest::expect_bitwise_equal({got}, ktest::to_host(out), "sum of squares");
  });
  // A bf16 buffer's sum is that of its widened values, bit for bit.
  View<kk::bf16*> x16("x16", n);
  View<float*> wide("wide", n);
  kk::convert(Exec(), x16, x);
  kk::convert(Exec(), wide, x16);
  View<double*> out16("out16", 1);
  sos.run(Exec(), wide.data(), Kokkos::subview(out, 0));
  sos.run(Exec(), x16.data(), Kokkos::subview(out16, 0));
  ktest::expect_bitwise_equal(ktest::to_host(out), ktest::to_host(out16), "sum of squares of bf16");
  const SoS none({});
  none.run(Exec(), x.data(), Kokkos::subview(out, 0));
  EXPECT_EQ(ktest::to_host(out)[0], 0.0);
}
