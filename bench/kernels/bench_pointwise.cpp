// Memory-bound kernel cases, judged against the copy bandwidth measured in the same run:
// LayerNorm and RMSNorm, GELU, SwiGLU, residual add, RoPE and the causal softmax, forward (fwd)
// and backward (bwd), and the cross-entropy with its gradient (fwdbwd), at GPT-3-small shapes
// (B*T = 2048 tokens, and 8192 on a device; C = 768, 4C), GPT-2's vocabulary (512 tokens) and the
// Llama-8B proxy (256 tokens, F = 14336, 32 query / 8 kv heads of 128). Names are
// <kernel>/<fwd|bwd|fwdbwd>/<shape>.
// gbps counts the bytes each call must move at least (every input read once, every output
// written once), so vs_ceiling is a lower bound on the fraction of bandwidth used.
#include <Kokkos_Random.hpp>

#include "activations.hpp"
#include "ceilings.hpp"
#include "cross_entropy.hpp"
#include "layernorm.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"
#include "softmax.hpp"

namespace kformer::bench {
namespace {

template <class T>
using V = kernels::DView<T, Exec>;

// v filled with uniform values in [-1, 1).
template <class View>
View random_view(View v) {
  Kokkos::Random_XorShift64_Pool<Exec> pool(4321);
  Kokkos::fill_random(v, pool, -1.0f, 1.0f);
  return v;
}

void register_norms(int N, int C) {
  const double nc = 4.0 * N * C, shape_extra = 4.0 * (2.0 * N + 3.0 * C);
  const std::string s = dims({N, C});
  add_mem("layernorm/fwd/" + s, [=] {
    auto x = random_view(V<float**>("x", N, C)), y = V<float**>("y", N, C);
    auto w = random_view(V<float*>("w", C)), b = random_view(V<float*>("b", C));
    V<float*> mean("mean", N), rstd("rstd", N);
    return std::function<void()>([=] { kernels::layernorm_forward(Exec(), y, mean, rstd, x, w, b); });
  }, 2 * nc + shape_extra);
  add_mem("layernorm/bwd/" + s, [=] {
    auto x = random_view(V<float**>("x", N, C)), dy = random_view(V<float**>("dy", N, C));
    auto w = random_view(V<float*>("w", C)), b = random_view(V<float*>("b", C));
    V<float**> y("y", N, C), dx("dx", N, C);
    V<float*> mean("mean", N), rstd("rstd", N), dw("dw", C), db("db", C);
    kernels::layernorm_forward(Exec(), y, mean, rstd, x, w, b);
    return std::function<void()>([=] { kernels::layernorm_backward(Exec(), dx, dw, db, dy, x, w, mean, rstd); });
  }, 3 * nc + shape_extra);
  add_mem("rmsnorm/fwd/" + s, [=] {
    auto x = random_view(V<float**>("x", N, C));
    auto w = random_view(V<float*>("w", C));
    V<float**> y("y", N, C);
    V<float*> rstd("rstd", N);
    return std::function<void()>([=] { kernels::rmsnorm_forward(Exec(), y, rstd, x, w); });
  }, 2 * nc + shape_extra);
  add_mem("rmsnorm/bwd/" + s, [=] {
    auto x = random_view(V<float**>("x", N, C)), dy = random_view(V<float**>("dy", N, C));
    auto w = random_view(V<float*>("w", C));
    V<float**> y("y", N, C), dx("dx", N, C);
    V<float*> rstd("rstd", N), dw("dw", C);
    kernels::rmsnorm_forward(Exec(), y, rstd, x, w);
    return std::function<void()>([=] { kernels::rmsnorm_backward(Exec(), dx, dw, dy, x, w, rstd); });
  }, 3 * nc + shape_extra);
}

// GELU and the residual add over N tokens of the GPT-3 small width.
void register_token_kernels(int N) {
  const int C = 768, F = 4 * C;
  add_mem("gelu/fwd/" + dims({N, F}), [=] {
    auto x = random_view(V<float**>("x", N, F));
    V<float**> y("y", N, F);
    return std::function<void()>([=] { kernels::gelu_forward(Exec(), y, x); });
  }, 2 * 4.0 * N * F);
  add_mem("gelu/bwd/" + dims({N, F}), [=] {
    auto x = random_view(V<float**>("x", N, F)), dy = random_view(V<float**>("dy", N, F));
    V<float**> dx("dx", N, F);
    return std::function<void()>([=] { kernels::gelu_backward(Exec(), dx, x, dy); });
  }, 3 * 4.0 * N * F);
  add_mem("residual/fwd/" + dims({N, C}), [=] {
    auto a = random_view(V<float**>("a", N, C)), b = random_view(V<float**>("b", N, C));
    V<float**> y("y", N, C);
    return std::function<void()>([=] { kernels::residual_forward(Exec(), y, a, b); });
  }, 3 * 4.0 * N * C);
  add_mem("residual/bwd/" + dims({N, C}), [=] {
    auto dy = random_view(V<float**>("dy", N, C));
    V<float**> da("da", N, C), db("db", N, C);
    return std::function<void()>([=] { kernels::residual_backward(Exec(), da, db, dy); });
  }, 3 * 4.0 * N * C);
}

// On a device: the residual add and GELU forward in the host work shape, one element per thread
// (what every streaming kernel ran before the GPU shape took several lanes, work_shape.hpp), so
// that one run measures what the lanes buy. Named probe_*: not counted against the targets.
void register_one_lane(int N) {
  const int C = 768, F = 4 * C;
  add_mem("probe_one_lane/residual/fwd/" + dims({N, C}), [=] {
    auto a = random_view(V<float**>("a", N, C)), b = random_view(V<float**>("b", N, C));
    V<float**> y("y", N, C);
    return std::function<void()>([=] { kernels::residual_forward<kernels::Shape::host>(Exec(), y, a, b); });
  }, 3 * 4.0 * N * C);
  add_mem("probe_one_lane/gelu/fwd/" + dims({N, F}), [=] {
    auto x = random_view(V<float**>("x", N, F));
    V<float**> y("y", N, F);
    return std::function<void()>([=] { kernels::gelu_forward<kernels::Shape::host>(Exec(), y, x); });
  }, 2 * 4.0 * N * F);
}

// SwiGLU, RoPE and the causal softmax at the Llama-8B proxy and one 1024-token sequence.
void register_fixed_shapes() {
  const int NL = 256, FL = 14336;
  add_mem("swiglu/fwd/" + dims({NL, FL}), [=] {
    auto x = random_view(V<float**>("x", NL, 2 * FL));
    V<float**> y("y", NL, FL);
    return std::function<void()>([=] { kernels::swiglu_forward(Exec(), y, x); });
  }, 3 * 4.0 * NL * FL);
  add_mem("swiglu/bwd/" + dims({NL, FL}), [=] {
    auto x = random_view(V<float**>("x", NL, 2 * FL)), dy = random_view(V<float**>("dy", NL, FL));
    V<float**> dx("dx", NL, 2 * FL);
    return std::function<void()>([=] { kernels::swiglu_backward(Exec(), dx, x, dy); });
  }, 5 * 4.0 * NL * FL);
  // RoPE on a Llama packed QKV (32 + 8 rotated heads, 8 value heads copied), out of place.
  const int H = 32, KV = 8, hd = 128, W = (H + 2 * KV) * hd;
  add_mem("rope/fwd/" + dims({NL, W}), [=] {
    auto x = random_view(V<float***>("x", 1, NL, W));
    V<float***> y("y", 1, NL, W);
    return std::function<void()>([=] { kernels::rope_forward(Exec(), y, x, H + KV, hd, 0); });
  }, 2 * 4.0 * NL * W);
  // Causal softmax over materialised scores (B=1, H=12, T=1024), in place; bwd out of place.
  const int SH = 12, ST = 1024;
  const double tt = 4.0 * SH * ST * ST;
  add_mem("softmax/fwd/" + dims({SH, ST, ST}), [=] {
    auto s = random_view(V<float****>("s", 1, SH, ST, ST));
    return std::function<void()>([=] { kernels::causal_softmax_forward(Exec(), s); });
  }, 2 * tt);
  add_mem("softmax/bwd/" + dims({SH, ST, ST}), [=] {
    auto p = random_view(V<float****>("p", 1, SH, ST, ST)), dp = random_view(V<float****>("dp", 1, SH, ST, ST));
    V<float****> ds("ds", 1, SH, ST, ST);
    return std::function<void()>([=] { kernels::causal_softmax_backward(Exec(), ds, dp, p); });
  }, 3 * tt);
  // The loss and its gradient over GPT-2's padded vocabulary for 512 tokens (the logits read, their
  // gradient written): one rank's one pass over whole rows, into another view and in place as the
  // fp32 step runs it (each call's logits then the last call's gradient: as good for the time), and
  // `_split`, the three passes a TP rank runs over its share (here the whole vocabulary, no
  // reductions between them), which read the logits from memory three times.
  const int XN = 512, XV = 50304, vocab = 50257;
  for (const char* mode : {"_split", "", "_inplace"})
    add_mem(std::string("cross_entropy/fwdbwd") + mode + "/" + dims({XN, XV}), [=] {
      const bool in_place = mode == std::string("_inplace"), split = mode == std::string("_split");
      auto logits = random_view(V<float**>("logits", XN, XV));
      const V<float**> dlogits = in_place ? logits : V<float**>("dlogits", XN, XV), stats("stats", 2, XN);
      V<float*> loss("loss", XN), lmax("lmax", XN);
      V<std::int32_t*> targets("targets", XN);
      Kokkos::parallel_for(
          "targets", Kokkos::RangePolicy<Exec>(0, XN), KOKKOS_LAMBDA(const int n) { targets(n) = (n * 7919) % vocab; });
      return std::function<void()>([=] {
        if (!split) return kernels::xent_forward_backward(Exec(), loss, dlogits, logits, targets, vocab, 1.f / XN);
        kernels::xent_local_max(Exec(), lmax, logits, 0, vocab);
        kernels::xent_local_sums(Exec(), stats, logits, targets, lmax, 0, vocab);
        kernels::xent_finish(Exec(), loss, dlogits, logits, targets, lmax, stats, 0, vocab, 1.f / XN);
      });
    }, 2 * 4.0 * XN * XV);
}

// A device adds the GPT-2 124M run's own micro-batch (8 sequences of 1024 tokens): at 2048 tokens
// a call moves 6-19 MB, a few microseconds of HBM, so there the launch (about 10 us with Kokkos
// 3.4 on an H100, calibrate's launch_us) rather than the kernel sets the time.
const bool registered = (register_norms(2048, 768), register_norms(256, 4096), register_token_kernels(2048),
                         register_fixed_shapes(),
                         kernels::runs_on_host<Exec> ||
                             (register_norms(8192, 768), register_token_kernels(8192), register_one_lane(8192), true));

}  // namespace
}  // namespace kformer::bench
