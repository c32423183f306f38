// GEMM cases: the linear layers of a GPT-3-small block (B*T = 2048, C = 768: QKV 3C, projection C,
// FC1 4C, FC2 back to C) and of a Llama-8B proxy layer at 256 tokens (C = 4096, KV = 8 heads of 128,
// F = 14336). Names are gemm/<impl>/<tokens>x<in>x<out> (forward, y = x W^T + b) and
// matmul_bwd/<impl>/<tokens>x<in>x<out> (dx, dW and db); bias_bwd/<tokens>x<out> is db alone
// (memory-bound: vs_ceiling against the copy bandwidth). vs_ceiling is against the bare vendor
// sgemm calls (OpenBLAS on the host, cuBLAS under CUDA) at the same shape, without the bias work,
// timed alternately with the case in the same loop (see run_case): so `vendor` itself can fall
// short of 1 by its bias work only.
// gemm_bf16/<impl>/<tokens>x<in>x<out> is the forward with x and W in bf16 (fp32 accumulation, y
// in fp32); its vs_ceiling is against the fp32 forward of the same impl at the same shape, timed
// alternately in the same loop: the bf16/fp32 speed ratio (issue 16 asks native >= 0.9 where the
// CPU has no AVX512-BF16; on a shared machine read it as a ratio, not as a verdict).
// gemm_bf16_vs_vendor/<tokens>x<in>x<out> is native's bf16 forward against the vendor's (oneDNN
// or widened OpenBLAS on the host, cublasGemmEx under CUDA): with gemm/native/ (against the bare
// vendor sgemm), the native/vendor ratio in both precisions from one run, --benchmark_filter='^gemm'.
// gemm_bf16_stored/vendor/<shape>: see register_cases.
// gemm_gelu/<impl>/<tokens>x<in>x<out> (GPT FC1 shape) is matmul_forward_gelu, the GELU fused into
// the GEMM's epilogue, against matmul_forward then gelu_forward: the gain of the fusion.
// matmul_bwd_gelu/vendor/<shape> (GPT FC2 shape): see register_cases.
#include <Kokkos_Random.hpp>

#include <set>
#include <utility>

#include "activations.hpp"
#include "ceilings.hpp"
#include "gemm.hpp"
#include "matmul_backward_gelu.hpp"

namespace kformer::bench {
namespace {

using kernels::GemmImpl;
template <class T>
using V = kernels::DView<T, Exec>;

// f with cuBLASLt's epilogues off (the passes they replace); f itself elsewhere.
template <class F>
void without_cublaslt(F&& f) {
#if defined(KOKKOS_ENABLE_CUDA)
  bool& on = kernels::detail::cublaslt_epilogues_on();
  const bool was = on;
  on = false;
  f();
  on = was;
#else
  f();
#endif
}

struct Linear {
  V<float**> x, w, y, dx, dw;
  V<float*> b, db;
  Linear(int n, int in, int out)
      : x("x", n, in), w("w", out, in), y("y", n, out), dx("dx", n, in), dw("dw", out, in), b("b", out),
        db("db", out) {
    Kokkos::Random_XorShift64_Pool<Exec> pool(1234);
    Kokkos::fill_random(x, pool, -1.0f, 1.0f);
    Kokkos::fill_random(w, pool, -0.05f, 0.05f);
    Kokkos::fill_random(b, pool, -0.05f, 0.05f);
  }
  void forward(GemmImpl impl) { kernels::matmul_forward(Exec(), impl, y, x, w, b); }
  // The GPT MLP's first layer: the pre-activation in y, GELU of it in act (fused or not).
  void forward_gelu(GemmImpl impl, const V<float**>& act, bool fused) {
    if (fused) {
      kernels::matmul_forward_gelu(Exec(), impl, y, act, x, w, b);
    } else {
      kernels::matmul_forward(Exec(), impl, y, x, w, b);
      kernels::gelu_forward(Exec(), act, y);
    }
  }
  void backward(GemmImpl impl) { kernels::matmul_backward(Exec(), impl, dx, dw, db, y, x, w); }
  // The ceilings: the vendor sgemm calls alone, without the bias pass or the bias gradient.
  void sgemm_only() {
    kernels::gemm(Exec(), GemmImpl::vendor, kernels::Op::N, kernels::Op::T, 1.0f, x, w, 0.0f, y);
  }
  void sgemm_only_backward() {
    kernels::gemm(Exec(), GemmImpl::vendor, kernels::Op::N, kernels::Op::N, 1.0f, y, w, 0.0f, dx);
    kernels::gemm(Exec(), GemmImpl::vendor, kernels::Op::T, kernels::Op::N, 1.0f, y, x, 1.0f, dw);
  }
};

// The forward of one linear layer with x and W in bf16 beside the same in fp32 (same values).
struct LinearBf16 {
  Linear f32;
  V<kernels::bf16**> x, w;
  LinearBf16(int n, int in, int out) : f32(n, in, out), x("x16", n, in), w("w16", out, in) {
    round_into(x, f32.x), round_into(w, f32.w);
  }
  static void round_into(const V<kernels::bf16**>& dst, const V<float**>& src) {
    Kokkos::parallel_for(
        "round_to_bf16", Kokkos::RangePolicy<Exec>(0, src.span()),
        KOKKOS_LAMBDA(const std::size_t i) { dst.data()[i] = kernels::bf16(src.data()[i]); });
    Kokkos::fence();
  }
  void forward(GemmImpl impl) {
    kernels::gemm(Exec(), impl, kernels::Op::N, kernels::Op::T, 1.0f, x, w, 0.0f, f32.y, f32.b);
  }
  // The layer's output kept in bf16 (matmul_forward_stored), GELU of it into act when given;
  // b: f32.b or none.
  void forward_stored(GemmImpl impl, const V<kernels::bf16**>& y, const V<kernels::bf16**>& act,
                      const V<float*>& b) {
    kernels::matmul_forward_stored(Exec(), impl, y, f32.y, act, x, w, b);
  }
};

// Seconds of timed calls per case (as many again go to the reference): 1 s, and 3 s for the
// Llama MLP shapes (over 10 GFLOP a call, ~0.2 s on the 2-core host), so that every case gets
// about 15 pairs or more for its median and quartiles.
double gemm_min_time(double flops) { return flops > 1e10 ? 3.0 : 1.0; }
double flops_of(int n, int in, int out) { return 2.0 * n * in * out; }

std::string shape_name(int n, int in, int out) {
  return std::to_string(n) + "x" + std::to_string(in) + "x" + std::to_string(out);
}

void register_cases() {
  const int shapes[][3] = {{2048, 768, 2304}, {2048, 768, 768},   {2048, 768, 3072},  {2048, 3072, 768},
                           {256, 4096, 4096}, {256, 4096, 1024}, {256, 4096, 14336}, {256, 14336, 4096}};
  std::set<std::pair<int, int>> bias_shapes;
  for (GemmImpl impl : {GemmImpl::native, GemmImpl::vendor})
    for (const auto& s : shapes) {
      const int n = s[0], in = s[1], out = s[2];
      const std::string shape = shape_name(n, in, out);
      add_case(std::string("gemm/") + kernels::to_string(impl) + "/" + shape, [=](benchmark::State& state) {
        Linear l(n, in, out);
        const double flops = 2.0 * n * in * out;
        run_case(state, [&] { l.forward(impl); }, flops, 4.0 * (double(n) * in + double(in) * out + double(n) * out),
                 Reference{[&] { l.sgemm_only(); }, flops});
      }, gemm_min_time(flops_of(n, in, out)));
      if (bias_shapes.insert({n, out}).second)  // the bias gradient, one code for both impls
        add_case("bias_bwd/" + std::to_string(n) + "x" + std::to_string(out), [=](benchmark::State& state) {
          V<float**> dy("dy", n, out);
          V<float*> db("db", out);
          Kokkos::deep_copy(dy, 0.01f);
          run_case(state, [&] { kernels::bias_backward(Exec(), db, V<const float**>(dy)); }, 0.0,
                   4.0 * (double(n) * out + 2.0 * out));
        });
      add_case(std::string("gemm_bf16/") + kernels::to_string(impl) + "/" + shape, [=](benchmark::State& state) {
        LinearBf16 l(n, in, out);
        const double flops = 2.0 * n * in * out;
        run_case(state, [&] { l.forward(impl); }, flops, 2.0 * (double(n) * in + double(in) * out) + 4.0 * n * out,
                 Reference{[&] { l.f32.forward(impl); }, flops});
      }, gemm_min_time(flops_of(n, in, out)));
      // gemm_bf16_stored/vendor/<shape>: the output kept in bf16 as the block keeps it, at GPT's
      // QKV (bias) and FC1 (bias and GELU), written so by the vendor GEMM, against the path it
      // replaces (an fp32 C, its epilogue passes, then a convert pass): on the host oneDNN with the
      // bias in its epilogue, on a GPU cuBLASLt with the bias (and GELU) in its own.
      constexpr bool host = kernels::runs_on_host<Exec>;
      if (impl == GemmImpl::vendor && (out == 2304 || out == 3072) && in == 768 &&
          (!host || kernels::gemm_writes_bf16<Exec>(impl, true)))
        add_case("gemm_bf16_stored/vendor/" + shape, [=](benchmark::State& state) {
          LinearBf16 l(n, in, out);
          const bool gelu = out == 3072;
          const V<float*> b = l.f32.b;
          V<kernels::bf16**> y("y16", n, out), act("act16", gelu ? n : 0, out);
          const double flops = 2.0 * n * in * out;
          const double bytes = 2.0 * (double(n) * in + double(in) * out + (gelu ? 2.0 : 1.0) * n * out);
          run_case(state, [&] { l.forward_stored(impl, y, act, b); }, flops, bytes, Reference{[&] {
                     without_cublaslt([&] {
                       if (gelu)
                         kernels::matmul_forward_gelu(Exec(), impl, l.f32.y, act, l.x, l.w, b);
                       else
                         kernels::matmul_forward(Exec(), impl, l.f32.y, l.x, l.w, b);
                     });
                     kernels::convert(Exec(), y, l.f32.y);
                   }, flops});
        }, gemm_min_time(flops_of(n, in, out)));
      if (impl == GemmImpl::native)
        add_case("gemm_bf16_vs_vendor/" + shape, [=](benchmark::State& state) {
          LinearBf16 l(n, in, out);
          const double flops = 2.0 * n * in * out;
          run_case(state, [&] { l.forward(GemmImpl::native); },
                   flops, 2.0 * (double(n) * in + double(in) * out) + 4.0 * n * out,
                   Reference{[&] { l.forward(GemmImpl::vendor); }, flops});
        }, gemm_min_time(flops_of(n, in, out)));
      if (in == 768 && out == 3072)  // GPT FC1, the layer with the GELU
        add_case(std::string("gemm_gelu/") + kernels::to_string(impl) + "/" + shape, [=](benchmark::State& state) {
          Linear l(n, in, out);
          V<float**> act("act", n, out);
          const double flops = 2.0 * n * in * out;
          run_case(state, [&] { l.forward_gelu(impl, act, true); }, flops,
                   4.0 * (double(n) * in + double(in) * out + 2.0 * n * out),
                   Reference{[&] { l.forward_gelu(impl, act, false); }, flops});
        }, gemm_min_time(flops_of(n, in, out)));
      // matmul_bwd_gelu/vendor/<GPT FC2 shape>: FC2's backward through the GELU in bf16 with FC1's
      // bias gradient (kernels::matmul_backward_gelu, then bias_backward where it did not add that
      // itself), against the same with cuBLASLt's epilogues off (matmul_backward, gelu_backward,
      // bias_backward): on a GPU the dGELU + bias-gradient epilogue's gain; elsewhere one path twice.
      if (impl == GemmImpl::vendor && n == 2048 && in == 3072 && out == 768)
        add_case("matmul_bwd_gelu/vendor/" + shape, [=](benchmark::State& state) {
          using kernels::bf16;
          V<bf16**> dy("dy", n, out), act("act", n, in), w("w", out, in), pre("pre", n, in), d_pre("d_pre", n, in);
          V<float**> d_act("d_act", n, in), dw("dw", out, in);
          V<float*> db("db", out), db_pre("db_pre", in);
          Kokkos::deep_copy(dy, bf16(0.01f)), Kokkos::deep_copy(act, bf16(0.5f)), Kokkos::deep_copy(w, bf16(0.02f));
          Kokkos::deep_copy(pre, bf16(0.3f));
          const auto step = [&] {
            if (!kernels::matmul_backward_gelu(Exec(), impl, d_pre, db_pre, d_act, dw, db, V<const bf16**>(dy),
                                               V<const bf16**>(act), V<const bf16**>(w), V<const bf16**>(pre)))
              kernels::bias_backward(Exec(), db_pre, V<const bf16**>(d_pre));
          };
          const double flops = 4.0 * n * in * out;
          run_case(state, step, flops, 2.0 * (2.0 * n * out + double(out) * in + 3.0 * n * in) + 8.0 * out * in,
                   Reference{[&] { without_cublaslt(step); }, flops});
        }, gemm_min_time(4.0 * n * in * out));
      add_case(std::string("matmul_bwd/") + kernels::to_string(impl) + "/" + shape, [=](benchmark::State& state) {
        Linear l(n, in, out);
        Kokkos::deep_copy(l.y, 0.01f);
        const double flops = 4.0 * n * in * out;
        run_case(state, [&] { l.backward(impl); }, flops,
                 4.0 * (2.0 * n * in + 2.0 * in * out + double(n) * out),
                 Reference{[&] { l.sgemm_only_backward(); }, flops});
      }, gemm_min_time(flops_of(n, in, out)));
    }
}

const bool registered = (register_cases(), true);

}  // namespace
}  // namespace kformer::bench
