// Causal attention cases, naive, fused and batched_gemm (where the build has a vendor BLAS), at
// GPT-3-small shapes: B*T = 2048 tokens, C = 768, H = 12 heads of 64 (no GQA), for T = 128, 512,
// 1024, 2048 (B = 2048 / T). Names are attention/<kind>/T<T> (forward) and
// attention_bwd/<kind>/T<T>. Beside them, at T = 2048 with GQA (B = 1, H = 4, KV = 2: small
// enough for a CPU, the same cases on a GPU), attention[_bwd]/<kind>/T2048/hd<64|128>. fused in
// fp32 runs its tensor-core shape on a CUDA device of compute capability 8.0 or more, and there
// attention[_bwd]/fused_cuda_cores/T<1024|2048> its CUDA-core shape (GpuAttentionTile).
// In bf16 (train.precision=bf16's attention), with `vendor` (cuDNN) too where it is built:
// attention_bf16[_bwd]/<kind>/T<T> (12 heads of 64) and attention_bf16[_bwd]/<kind>/T<T>/hd128
// (6 heads of 128: the same d_model 768), 8192 tokens at T 1024 and 2048 on a device (issue 35's
// shapes against PyTorch SDPA), 2048 tokens at T 128 and 1024 on the host. gflops counts
// the model FLOPs of the causal half (forward 4*B*H*hd*T(T+1)/2, backward twice that; the fused
// backward's recomputation is not counted); vs_ceiling is against the vendor sgemm at the QKV
// projection's shape (2048x768x2304), timed alternately with the case (see run_case).
#include <Kokkos_Random.hpp>

#include "attention.hpp"
#include "ceilings.hpp"
#include "gemm.hpp"

namespace kformer::bench {
namespace {

template <class T>
using V = kernels::DView<T, Exec>;

// The reference: the QKV projection's sgemm, with its buffers.
struct QkvSgemm {
  static constexpr int n = 2048, in = 768, out = 2304;
  V<float**> x{"x", n, in}, w{"w", out, in}, y{"y", n, out};
  QkvSgemm() {
    Kokkos::deep_copy(x, 0.5f);
    Kokkos::deep_copy(w, 0.01f);
  }
  Reference reference() {
    return {[this] { kernels::matmul_forward(Exec(), kernels::GemmImpl::vendor, y, x, w); }, 2.0 * n * in * out};
  }
};

// One case's buffers in element type E (float, or bf16 as train.precision=bf16 keeps them: qkv,
// out, their gradients and the stored probabilities bf16; scores and statistics fp32).
template <class E = float>
struct AttentionCase {
  int B, T, H, KV, hd;
  kernels::AttentionState<Exec, E> state;
  V<E***> qkv, out, dout, dqkv;
  AttentionCase(kernels::AttentionKind kind, int b, int t, int h = 12, int kv = 12, int d = 64)
      : B(b), T(t), H(h), KV(kv), hd(d), qkv("qkv", b, t, (H + 2 * KV) * hd), out("out", b, t, H * hd),
        dout("dout", b, t, H * hd), dqkv("dqkv", b, t, (H + 2 * KV) * hd) {
    state = kernels::make_typed_attention_state<Exec, E>(kind, b, t, h);
    Kokkos::Random_XorShift64_Pool<Exec> pool(2024);
    V<float***> q32("q32", b, t, (H + 2 * KV) * hd), d32("d32", b, t, H * hd);
    Kokkos::fill_random(q32, pool, -1.0f, 1.0f);
    Kokkos::fill_random(d32, pool, -1.0f, 1.0f);
    kernels::convert(Exec(), qkv, q32);
    kernels::convert(Exec(), dout, d32);
  }
  void forward() { kernels::attention_forward(Exec(), out, state, qkv, H, KV); }
  void backward() { kernels::attention_backward(Exec(), dqkv, state, dout, qkv, out, H, KV); }
  double forward_flops() const { return 4.0 * B * H * hd * double(T) * (T + 1) / 2; }
};

// <family>/<suffix> (forward) and <family>_bwd/<suffix> on the shape B, T, H, KV, hd, in
// element type E.
template <class E = float>
void add_pair(kernels::AttentionKind kind, const std::string& suffix, int B, int T, int H, int KV, int hd,
              const std::string& family = "attention") {
  add_case(family + "/" + suffix, [=](benchmark::State& state) {
    AttentionCase<E> c(kind, B, T, H, KV, hd);
    QkvSgemm ref;
    run_case(state, [&] { c.forward(); }, c.forward_flops(), 0.0, ref.reference());
  });
  add_case(family + "_bwd/" + suffix, [=](benchmark::State& state) {
    AttentionCase<E> c(kind, B, T, H, KV, hd);
    QkvSgemm ref;
    c.forward();
    run_case(state, [&] { c.backward(); }, 2 * c.forward_flops(), 0.0, ref.reference());
  });
}

// The fused kernels in their CUDA-core shape (GpuAttentionTile) where fp32 takes the tensor-core
// shape (a CUDA build for compute capability 8.0 or more): attention[_bwd]/fused_cuda_cores/T<T>,
// the same shapes as fused's, so that one run sets the two side by side.
void add_cuda_core_pair(int T) {
  const int B = 2048 / T, H = 12, hd = 64;
  using Tile = kernels::GpuAttentionTile;
  add_case("attention/fused_cuda_cores/T" + std::to_string(T), [=](benchmark::State& state) {
    AttentionCase<> c(kernels::AttentionKind::fused, B, T, H, H, hd);
    QkvSgemm ref;
    run_case(state, [&] { kernels::attention_fused_forward<Tile>(Exec(), c.out, c.state.lse, c.qkv, H, H); },
             c.forward_flops(), 0.0, ref.reference());
  });
  add_case("attention_bwd/fused_cuda_cores/T" + std::to_string(T), [=](benchmark::State& state) {
    AttentionCase<> c(kernels::AttentionKind::fused, B, T, H, H, hd);
    QkvSgemm ref;
    kernels::attention_fused_forward<Tile>(Exec(), c.out, c.state.lse, c.qkv, H, H);
    run_case(state,
             [&] {
               kernels::attention_fused_backward<Tile>(Exec(), c.dqkv, c.state.delta, c.dout, c.qkv, c.out, c.state.lse,
                                                       H, H);
             },
             2 * c.forward_flops(), 0.0, ref.reference());
  });
}

void register_cases() {
  using K = kernels::AttentionKind;
  const auto name = [](K kind) {
    return std::string(kind == K::naive          ? "naive"
                       : kind == K::fused        ? "fused"
                       : kind == K::batched_gemm ? "batched_gemm"
                                                 : "vendor");
  };
  const auto built = [](K kind) {  // batched_gemm needs a vendor BLAS, vendor cuDNN under CUDA
    return kind == K::batched_gemm ? kernels::gemm_vendor_available<Exec>()
           : kind == K::vendor     ? kernels::attention_vendor_available<Exec>()
                                   : true;
  };
  // fused first and naive last, the CUDA-core shape right after fused: a capped run keeps the
  // cases it needs most (Google Benchmark runs them in this order).
  for (K kind : {K::fused, K::batched_gemm, K::naive}) {
    if (!built(kind)) continue;
    const std::string variant = name(kind);
    for (int T : {128, 512, 1024, 2048}) add_pair(kind, variant + "/T" + std::to_string(T), 2048 / T, T, 12, 12, 64);
    for (int hd : {64, 128}) add_pair(kind, variant + "/T2048/hd" + std::to_string(hd), 1, 2048, 4, 2, hd);
    if constexpr (kernels::detail::tensor_core_space<Exec>)
      if (kind == K::fused)
        for (int T : {1024, 2048}) add_cuda_core_pair(T);
  }
  // bf16 mixed precision's attention (attention_bf16[_bwd]/<kind>/T<T>[/hd128]): on a device, the
  // GPT-2 124M step's (T 1024, 8 sequences) and T 2048, each with 12 heads of 64 and 6 of 128; on
  // the host T 128 and the 124M step's T 1024. Registered after the fp32 cases, vendor first and naive last: Google
  // Benchmark runs cases in this order, and a capped run (scripts/gpu_perf.sh) that stops early
  // keeps issue 35's cases (vendor against SDPA) and loses the slowest, least needed ones.
  constexpr bool host = kernels::runs_on_host<Exec>;
  for (K kind : {K::vendor, K::batched_gemm, K::fused, K::naive}) {
    if (!built(kind)) continue;
    for (int hd : {64, 128})
      for (int T : host ? std::vector<int>{128, 1024} : std::vector<int>{1024, 2048}) {
        const int H = 768 / hd;  // d_model 768 either way
        add_pair<kernels::bf16>(kind, name(kind) + "/T" + std::to_string(T) + (hd == 64 ? "" : "/hd128"),
                                (host ? 2048 : 8192) / T, T, H, H, hd, "attention_bf16");
      }
  }
}

const bool registered = (register_cases(), true);

}  // namespace
}  // namespace kformer::bench
