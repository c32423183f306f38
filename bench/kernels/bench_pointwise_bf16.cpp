// The memory-bound kernels of bench_pointwise.cpp on bf16 activations (train.precision=bf16), at
// the same shapes, named <kernel>_bf16/<fwd|bwd>/<shape> so that each sits beside its fp32 case:
// every activation and activation gradient bf16 (the norms' statistics and weights, the softmax's
// scores and the gradients of probabilities stay fp32, as in the mini-app). gbps counts 2 bytes
// per bf16 element, so the fp32/bf16 ratio of times is the speed-up from halving the traffic.
#include <Kokkos_Random.hpp>

#include <utility>

#include "activations.hpp"
#include "ceilings.hpp"
#include "convert.hpp"
#include "layernorm.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"
#include "softmax.hpp"

namespace kformer::bench {
namespace {

using kernels::bf16;
template <class T>
using V = kernels::DView<T, Exec>;
constexpr double kH = 2.0, kF = 4.0;  // bytes of a bf16 and of a float

// A view of uniform values in [-1, 1), rounded when T is bf16.
template <class T, class... Ext>
V<T> rnd(const char* label, Ext... n) {
  V<float*> f("f", (std::size_t(n) * ...));
  Kokkos::Random_XorShift64_Pool<Exec> pool(4321);
  Kokkos::fill_random(f, pool, -1.0f, 1.0f);
  V<T> v{std::string(label), std::size_t(n)...};
  kernels::convert(Exec(), v, f);
  Exec().fence();
  return v;
}

void register_norms(int N, int C) {
  const double nc = double(N) * C, extra = kF * (2.0 * N + 3.0 * C);
  const std::string s = dims({N, C});
  add_mem("layernorm_bf16/fwd/" + s, [=] {
    auto x = rnd<bf16**>("x", N, C);
    V<bf16**> y("y", N, C);
    auto w = rnd<float*>("w", C), b = rnd<float*>("b", C);
    V<float*> mean("mean", N), rstd("rstd", N);
    return std::function<void()>([=] { kernels::layernorm_forward(Exec(), y, mean, rstd, x, w, b); });
  }, 2 * kH * nc + extra);
  add_mem("layernorm_bf16/bwd/" + s, [=] {
    auto x = rnd<bf16**>("x", N, C), dy = rnd<bf16**>("dy", N, C);
    auto w = rnd<float*>("w", C), b = rnd<float*>("b", C);
    V<bf16**> y("y", N, C), dx("dx", N, C);
    V<float*> mean("mean", N), rstd("rstd", N), dw("dw", C), db("db", C);
    kernels::layernorm_forward(Exec(), y, mean, rstd, x, w, b);
    return std::function<void()>([=] { kernels::layernorm_backward(Exec(), dx, dw, db, dy, x, w, mean, rstd); });
  }, 3 * kH * nc + extra);
  add_mem("rmsnorm_bf16/fwd/" + s, [=] {
    auto x = rnd<bf16**>("x", N, C);
    auto w = rnd<float*>("w", C);
    V<bf16**> y("y", N, C);
    V<float*> rstd("rstd", N);
    return std::function<void()>([=] { kernels::rmsnorm_forward(Exec(), y, rstd, x, w); });
  }, 2 * kH * nc + extra);
  add_mem("rmsnorm_bf16/bwd/" + s, [=] {
    auto x = rnd<bf16**>("x", N, C), dy = rnd<bf16**>("dy", N, C);
    auto w = rnd<float*>("w", C);
    V<bf16**> y("y", N, C), dx("dx", N, C);
    V<float*> rstd("rstd", N), dw("dw", C);
    kernels::rmsnorm_forward(Exec(), y, rstd, x, w);
    return std::function<void()>([=] { kernels::rmsnorm_backward(Exec(), dx, dw, dy, x, w, rstd); });
  }, 3 * kH * nc + extra);
}

// GELU and the residual add over N tokens of the GPT-3 small width.
void register_token_kernels(int N) {
  const int C = 768, F = 4 * C;
  add_mem("gelu_bf16/fwd/" + dims({N, F}), [=] {
    auto x = rnd<bf16**>("x", N, F);
    V<bf16**> y("y", N, F);
    return std::function<void()>([=] { kernels::gelu_forward(Exec(), y, x); });
  }, 2 * kH * N * F);
  add_mem("gelu_bf16/bwd/" + dims({N, F}), [=] {
    auto x = rnd<bf16**>("x", N, F), dy = rnd<bf16**>("dy", N, F);
    V<bf16**> dx("dx", N, F);
    return std::function<void()>([=] { kernels::gelu_backward(Exec(), dx, x, dy); });
  }, 3 * kH * N * F);
  add_mem("residual_bf16/fwd/" + dims({N, C}), [=] {
    auto a = rnd<bf16**>("a", N, C), b = rnd<bf16**>("b", N, C);
    V<bf16**> y("y", N, C);
    return std::function<void()>([=] { kernels::residual_forward(Exec(), y, a, b); });
  }, 3 * kH * N * C);
  add_mem("residual_bf16/bwd/" + dims({N, C}), [=] {
    auto dy = rnd<bf16**>("dy", N, C);
    V<bf16**> da("da", N, C), db("db", N, C);
    return std::function<void()>([=] { kernels::residual_backward(Exec(), da, db, dy); });
  }, 3 * kH * N * C);
}

// A copy of src (N,C) one element past an aligned allocation, so that no row starts 16-byte aligned
// and the norms read it one channel at a time (norm_registers.hpp refuses the 8-channel runs), and
// the allocation that holds it (keep it as long as the view).
using Unaligned = Kokkos::View<bf16**, Kokkos::LayoutRight, Exec::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
std::pair<V<bf16*>, Unaligned> unaligned(const V<bf16**>& src) {
  const int N = int(src.extent(0)), C = int(src.extent(1));
  V<bf16*> buf("unaligned", std::size_t(N) * C + 1);
  const Unaligned v(buf.data() + 1, N, C);
  Kokkos::deep_copy(v, src);
  return {buf, v};
}

// On a device: the residual add and GELU forward in the host work shape, one element per thread
// (bench_pointwise.cpp says why), and LayerNorm with one channel a load (what the 8-channel runs
// replaced, session 51). Named probe_*: not counted against the targets.
void register_one_lane(int N) {
  const int C = 768, F = 4 * C;
  const double nc = double(N) * C, extra = kF * (2.0 * N + 3.0 * C);
  add_mem("probe_one_channel/layernorm_bf16/fwd/" + dims({N, C}), [=] {
    const auto x = unaligned(rnd<bf16**>("x", N, C));
    V<bf16**> y("y", N, C);
    auto w = rnd<float*>("w", C), b = rnd<float*>("b", C);
    V<float*> mean("mean", N), rstd("rstd", N);
    return std::function<void()>([=] { kernels::layernorm_forward(Exec(), y, mean, rstd, x.second, w, b); });
  }, 2 * kH * nc + extra);
  add_mem("probe_one_channel/layernorm_bf16/bwd/" + dims({N, C}), [=] {
    const auto x = unaligned(rnd<bf16**>("x", N, C)), dy = unaligned(rnd<bf16**>("dy", N, C));
    auto w = rnd<float*>("w", C), b = rnd<float*>("b", C);
    V<bf16**> y("y", N, C), dx("dx", N, C);
    V<float*> mean("mean", N), rstd("rstd", N), dw("dw", C), db("db", C);
    kernels::layernorm_forward(Exec(), y, mean, rstd, x.second, w, b);
    return std::function<void()>(
        [=] { kernels::layernorm_backward(Exec(), dx, dw, db, dy.second, x.second, w, mean, rstd); });
  }, 3 * kH * nc + extra);
  add_mem("probe_one_lane/residual_bf16/fwd/" + dims({N, C}), [=] {
    auto a = rnd<bf16**>("a", N, C), b = rnd<bf16**>("b", N, C);
    V<bf16**> y("y", N, C);
    return std::function<void()>([=] { kernels::residual_forward<kernels::Shape::host>(Exec(), y, a, b); });
  }, 3 * kH * N * C);
  add_mem("probe_one_lane/gelu_bf16/fwd/" + dims({N, F}), [=] {
    auto x = rnd<bf16**>("x", N, F);
    V<bf16**> y("y", N, F);
    return std::function<void()>([=] { kernels::gelu_forward<kernels::Shape::host>(Exec(), y, x); });
  }, 2 * kH * N * F);
}

// SwiGLU, RoPE and the causal softmax at the Llama-8B proxy and one 1024-token sequence.
void register_fixed_shapes() {
  const int NL = 256, FL = 14336;
  add_mem("swiglu_bf16/fwd/" + dims({NL, FL}), [=] {
    auto x = rnd<bf16**>("x", NL, 2 * FL);
    V<bf16**> y("y", NL, FL);
    return std::function<void()>([=] { kernels::swiglu_forward(Exec(), y, x); });
  }, 3 * kH * NL * FL);
  add_mem("swiglu_bf16/bwd/" + dims({NL, FL}), [=] {
    auto x = rnd<bf16**>("x", NL, 2 * FL), dy = rnd<bf16**>("dy", NL, FL);
    V<bf16**> dx("dx", NL, 2 * FL);
    return std::function<void()>([=] { kernels::swiglu_backward(Exec(), dx, x, dy); });
  }, 5 * kH * NL * FL);
  const int H = 32, KV = 8, hd = 128, W = (H + 2 * KV) * hd;
  add_mem("rope_bf16/fwd/" + dims({NL, W}), [=] {
    auto x = rnd<bf16***>("x", 1, NL, W);
    V<bf16***> y("y", 1, NL, W);
    return std::function<void()>([=] { kernels::rope_forward(Exec(), y, x, H + KV, hd, 0); });
  }, 2 * kH * NL * W);
  // Softmax: fp32 scores in, bf16 probabilities out; the backward reads them with an fp32 dP.
  const int SH = 12, ST = 1024;
  const double tt = double(SH) * ST * ST;
  add_mem("softmax_bf16/fwd/" + dims({SH, ST, ST}), [=] {
    auto s = rnd<float****>("s", 1, SH, ST, ST);
    V<bf16****> p("p", 1, SH, ST, ST);
    return std::function<void()>([=] { kernels::causal_softmax_forward(Exec(), p, V<const float****>(s)); });
  }, (kF + kH) * tt);
  add_mem("softmax_bf16/bwd/" + dims({SH, ST, ST}), [=] {
    auto p = rnd<bf16****>("p", 1, SH, ST, ST);
    auto dp = rnd<float****>("dp", 1, SH, ST, ST);
    V<float****> ds("ds", 1, SH, ST, ST);
    return std::function<void()>([=] { kernels::causal_softmax_backward(Exec(), ds, V<const float****>(dp), p); });
  }, (kH + 2 * kF) * tt);
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
