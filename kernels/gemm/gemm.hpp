// Matrix multiply with bias, the linear layer of every transformer block, and its backward.
// Two implementations behind one call, chosen at run time (`kernels.gemm`): `native`, the
// portable Kokkos GEMM of gemm_native.hpp, and `vendor`, CBLAS on host memory or cuBLAS under
// CUDA (gemm_vendor.hpp), so that the gap between portable code and the vendor is measurable.
//
// Linear layer convention (as torch.nn.Linear and llm.c): weight W(out, in), y = x W^T + b.
//   x (N, in), W (out, in), b (out), y (N, out); N = B*T tokens.
// W(out, in) keeps both tensor-parallel splits contiguous per rank: a column-parallel layer
// (QKV, FC1, the vocab-parallel head) takes a block of `out` rows, a row-parallel layer
// (attention projection, FC2) takes a block of `in` columns in its own (out, in/tp) buffer. It
// is also the layout of the embedding table wte (V, C), so the tied GPT head is W = wte.
//
// Gradients of parameters (dW, db) are accumulated (+=), as in llm.c: the trainer zeroes them
// once per step and micro-batches and tied uses add into them. Gradients of activations (dx)
// are overwritten. Every path is deterministic run to run.
//
// bf16 mixed precision: gemm() also takes A and B in bf16 (kernels/bf16.hpp), accumulating in
// fp32 into an fp32 C: native widens while packing; vendor is oneDNN's bf16 matmul on the host
// (OpenBLAS's sgemm on widened copies where oneDNN is missing or has no bf16 on this CPU) and
// cublasGemmEx under CUDA.
#pragma once

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "activations.hpp"
#include "bf16.hpp"
#include "call_record.hpp"
#include "convert.hpp"
#include "work_shape.hpp"
#include "gemm_native.hpp"
#include "gemm_vendor.hpp"
#include "gemm_workspace.hpp"
#include "kernel_choice.hpp"
#include "kformer_config.hpp"
#include "ordered_sum.hpp"
#include "view_types.hpp"

namespace kformer::kernels {

// Whether `vendor` can run on ExecSpace in this build.
template <class ExecSpace>
constexpr bool gemm_vendor_available() {
#if defined(KOKKOS_ENABLE_CUDA)
  if (std::is_same<ExecSpace, Kokkos::Cuda>::value) return KFORMER_HAVE_CUBLAS != 0;
#endif
  return KFORMER_HAVE_CBLAS != 0 && runs_on_host<ExecSpace>;
}

enum class Op { N, T };  // op(A) = A or A^T

// Whether gemm's `impl` on ExecSpace writes a bf16 C itself (with the bias, when there is one,
// in its epilogue) rather than an fp32 C that a convert pass rounds. The vendor: oneDNN on the
// host, with or without a bias; cuBLAS without one (with one, matmul_forward_stored asks cuBLASLt
// for its bias epilogue first). Never the native GEMM, which adds its K chunks into C. Described
// as the CUDA build (described_as_cuda), cuBLAS's answer.
template <class ExecSpace>
bool gemm_writes_bf16(GemmImpl impl, bool with_bias) {
  if (impl == GemmImpl::vendor && described_as_cuda()) return !with_bias;
  if (impl != GemmImpl::vendor || !gemm_vendor_available<ExecSpace>()) return false;
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) return !with_bias;
#endif
  if constexpr (runs_on_host<ExecSpace>)
    return detail::host_gemm_writes_bf16();
  else
    return (void)with_bias, false;
}

// What gemm() does to C besides alpha op(A) op(B) + beta C: add bias(N) to every row (when bias
// has extent N), then, when gelu has extent (M, N), write GELU of each result into it (float or
// bf16, computed from the result rounded to gelu's type), C keeping the pre-activation for the
// backward. The native GEMM does both in its epilogue (gemm_epilogue.hpp); the vendor one in
// cuBLASLt's epilogue under CUDA where it has an algorithm for the call (a GELU only into an fp32
// output), else in passes over C around the BLAS call.
template <class ExecSpace, class TAct = float>
struct GemmEpilogue {
  DView<const float*, ExecSpace> bias;
  DView<TAct**, ExecSpace> gelu;
};

namespace detail {
// The vendor path's passes over out's C (M, N): C(i, j) = bias(j) (set) or += bias(j) (add),
// C = beta C (scale; 0 for beta == 0, never reading C), or the activation of C(i, j) into out's
// activation output (act). Work items are a row's
// chunk of columns (detail::for_rows_columns): one column per thread on a GPU, so a warp reads
// and writes 32 adjacent floats, and 64 contiguous ones per item on the host.
enum class RowsPass { set_bias, add_bias, scale, act };
template <class ExecSpace>
void gemm_rows_pass(const ExecSpace& exec, const GemmOut& out, RowsPass what) {
  float* const c = out.c;
  const float* const bias = out.bias;
  const std::int64_t ldc = out.ldc, lda = out.ldact;
  const float beta = out.beta;
  const char* label = "kformer::gemm_vendor_epilogue";
  if (what == RowsPass::set_bias)
    for_rows_columns<Shape::natural>(exec, label, out.M, out.N, KOKKOS_LAMBDA(const int i, const int j) { c[i * ldc + j] = bias[j]; });
  else if (what == RowsPass::add_bias)
    for_rows_columns<Shape::natural>(exec, label, out.M, out.N, KOKKOS_LAMBDA(const int i, const int j) { c[i * ldc + j] += bias[j]; });
  else if (what == RowsPass::scale)
    for_rows_columns<Shape::natural>(exec, label, out.M, out.N, KOKKOS_LAMBDA(const int i, const int j) {
      c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    });
  else if (float* const act = out.act32)
    for_rows_columns<Shape::natural>(exec, label, out.M, out.N,
                     KOKKOS_LAMBDA(const int i, const int j) { act[i * lda + j] = gelu_value(c[i * ldc + j]); });
  else if (bf16* const act16 = out.act16)
    for_rows_columns<Shape::natural>(exec, label, out.M, out.N, KOKKOS_LAMBDA(const int i, const int j) {
      act16[i * lda + j] = bf16(gelu_value(round_to_bf16(c[i * ldc + j])));
    });
}

// gemm() for A of TA and B of TB (float or bf16; the vendor path takes both the same), with the
// epilogue ep; Tiles: the native GEMM's tile configuration (tests run the GPU's on the host).
template <class ExecSpace, class TA, class TB, class Tiles = GemmTiles<ExecSpace>, class TAct = float>
void gemm_any(const ExecSpace& exec, GemmImpl impl, Op op_a, Op op_b, float alpha, DView<const TA**, ExecSpace> a,
              DView<const TB**, ExecSpace> b, float beta, DView<float**, ExecSpace> c,
              const GemmEpilogue<ExecSpace, TAct>& ep) {
  static_assert(std::is_same<TA, TB>::value, "gemm: give A and B the same element type");
  static_assert(std::is_same<TAct, float>::value || std::is_same<TAct, bf16>::value,
                "gemm: the GELU output is float or bf16");
  constexpr bool is_bf16 = std::is_same<TA, bf16>::value;
  const bool ta = op_a == Op::T, tb = op_b == Op::T;
  const int M = static_cast<int>(c.extent(0)), N = static_cast<int>(c.extent(1));
  const int K = static_cast<int>(ta ? a.extent(0) : a.extent(1));
  const auto& bias = ep.bias;
  const bool has_act = ep.gelu.extent(0) != 0 || ep.gelu.extent(1) != 0;
  if (int(ta ? a.extent(1) : a.extent(0)) != M || int(tb ? b.extent(1) : b.extent(0)) != K ||
      int(tb ? b.extent(0) : b.extent(1)) != N || (bias.extent(0) != 0 && int(bias.extent(0)) != N) ||
      (has_act && (int(ep.gelu.extent(0)) != M || int(ep.gelu.extent(1)) != N)))
    throw std::invalid_argument("gemm: shapes do not agree: C(" + std::to_string(M) + "," + std::to_string(N) +
                                ") = op(A)(" + std::to_string(a.extent(0)) + "," + std::to_string(a.extent(1)) +
                                ") op(B)(" + std::to_string(b.extent(0)) + "," + std::to_string(b.extent(1)) +
                                ") + bias(" + std::to_string(bias.extent(0)) + "), GELU output (" +
                                std::to_string(ep.gelu.extent(0)) + "," + std::to_string(ep.gelu.extent(1)) + ")");
  const std::int64_t lda = a.stride_0(), ldb = b.stride_0(), ldc = c.stride_0();
  GemmOut out{c.data(), ldc, bias.extent(0) ? bias.data() : nullptr, M, N, alpha, beta};
  if (has_act) {
    if constexpr (std::is_same<TAct, bf16>::value)
      out.act16 = ep.gelu.data();
    else
      out.act32 = ep.gelu.data();
    out.ldact = ep.gelu.stride_0();
  }
  if (impl == GemmImpl::native) {
    gemm_native_raw<ExecSpace, TA, TB, Tiles>(exec, K, a.data(), ta ? 1 : lda, ta ? lda : 1, b.data(), tb ? 1 : ldb,
                                              tb ? ldb : 1, out);
    return;
  }
  if (M == 0 || N == 0) return;
#if defined(KOKKOS_ENABLE_CUDA)
  // cuBLASLt adds the bias, and the GELU where its output is fp32 as C is, in its epilogue.
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    if (out.bias && beta == 0.0f && alpha == 1.0f && (!has_act || out.act32)) {
      LtGemm g;
      g.trans_a = ta, g.trans_b = tb, g.M = M, g.N = N, g.K = K;
      g.ab = is_bf16 ? BlasType::bf16 : BlasType::f32, g.d = BlasType::f32;
      g.a = a.data(), g.b = b.data(), g.lda = int(lda), g.ldb = int(ldb), g.bias = out.bias;
      if (has_act)
        g.epilogue = LtEpilogue::gelu_aux_bias, g.dp = out.act32, g.ldd = int(out.ldact), g.aux = c.data(), g.ldaux = ldc;
      else
        g.dp = c.data(), g.ldd = int(ldc);
      if (cublaslt_gemm(exec, g)) return;
    }
  }
#endif
  // The bias: with beta == 0, written into C first and the sgemm run with beta = 1, so that it
  // costs one write pass (the sgemm reads C where it writes it anyway) instead of a read-modify-
  // write pass over C after the sgemm; with beta != 0 (or K == 0), added after. The GELU last.
  const bool bias_first = out.bias && beta == 0.0f && K > 0;
  if (bias_first) {
    gemm_rows_pass(exec, out, RowsPass::set_bias);
    beta = 1.0f;
  }
  if (K == 0) {  // BLAS may return early when K == 0: C = beta C here (0 for beta == 0, C may hold NaN)
    if (beta != 1.0f) gemm_rows_pass(exec, out, RowsPass::scale);
  } else {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
      if constexpr (is_bf16)
        cublas_gemm_bf16_rowmajor(exec, ta, tb, M, N, K, alpha, a.data(), int(lda), b.data(), int(ldb), beta,
                                  c.data(), int(ldc));
      else
        cublas_sgemm_rowmajor(exec, ta, tb, M, N, K, alpha, a.data(), int(lda), b.data(), int(ldb), beta, c.data(),
                              int(ldc));
    } else
#endif
    {
      if constexpr (!runs_on_host<ExecSpace>) {
        throw std::runtime_error(std::string("kernels.gemm=vendor has no BLAS for execution space ") +
                                 ExecSpace::name() + ": use kernels.gemm=native");
      } else {
        exec.fence();  // BLAS runs on the calling thread: earlier kernels on exec must be done
        if constexpr (is_bf16)
          host_gemm_bf16_rowmajor(ta, tb, M, N, K, alpha, a.data(), int(lda), b.data(), int(ldb), beta, c.data(),
                                  int(ldc));
        else
          cblas_sgemm_rowmajor(ta, tb, M, N, K, alpha, a.data(), int(lda), b.data(), int(ldb), beta, c.data(),
                               int(ldc));
      }
    }
  }
  if (out.bias && !bias_first) gemm_rows_pass(exec, out, RowsPass::add_bias);
  if (has_act) gemm_rows_pass(exec, out, RowsPass::act);
}
}  // namespace detail

// C(M,N) = alpha op(A) op(B) + beta C, plus bias(N) on every row when bias has extent N.
// A is stored (M,K) for Op::N and (K,M) for Op::T; likewise B (K,N) or (N,K). beta == 0 never
// reads C.
template <class ExecSpace>
void gemm(const ExecSpace& exec, GemmImpl impl, Op op_a, Op op_b, float alpha, DView<const float**, ExecSpace> a,
          DView<const float**, ExecSpace> b, float beta, DView<float**, ExecSpace> c,
          DView<const float*, ExecSpace> bias = {}) {
  detail::gemm_any<ExecSpace, float, float>(exec, impl, op_a, op_b, alpha, a, b, beta, c,
                                            GemmEpilogue<ExecSpace>{bias, {}});
}

// The same with A and B in bf16: products exact in fp32, accumulated in fp32, C in fp32.
template <class ExecSpace>
void gemm(const ExecSpace& exec, GemmImpl impl, Op op_a, Op op_b, float alpha, DView<const bf16**, ExecSpace> a,
          DView<const bf16**, ExecSpace> b, float beta, DView<float**, ExecSpace> c,
          DView<const float*, ExecSpace> bias = {}) {
  detail::gemm_any<ExecSpace, bf16, bf16>(exec, impl, op_a, op_b, alpha, a, b, beta, c,
                                          GemmEpilogue<ExecSpace>{bias, {}});
}

// The same with an epilogue (bias, and GELU into a second output), A and B float or bf16.
template <class ExecSpace, class TAct>
void gemm(const ExecSpace& exec, GemmImpl impl, Op op_a, Op op_b, float alpha, DView<const float**, ExecSpace> a,
          DView<const float**, ExecSpace> b, float beta, DView<float**, ExecSpace> c,
          const GemmEpilogue<ExecSpace, TAct>& ep) {
  detail::gemm_any<ExecSpace, float, float>(exec, impl, op_a, op_b, alpha, a, b, beta, c, ep);
}
template <class ExecSpace, class TAct>
void gemm(const ExecSpace& exec, GemmImpl impl, Op op_a, Op op_b, float alpha, DView<const bf16**, ExecSpace> a,
          DView<const bf16**, ExecSpace> b, float beta, DView<float**, ExecSpace> c,
          const GemmEpilogue<ExecSpace, TAct>& ep) {
  detail::gemm_any<ExecSpace, bf16, bf16>(exec, impl, op_a, op_b, alpha, a, b, beta, c, ep);
}

// db(out) += column sums of dy(N, out). Deterministic on every backend: the rows are cut into
// chunks of a fixed size (never a function of the thread count), each chunk's column sums go to a
// workspace, then each column adds its chunks in order. Work shape (work_shape.hpp): on the host
// a work item sums W = 64 adjacent columns of a 128-row chunk (contiguous, vectorised reads of each
// row); in the GPU shape a thread sums one column of a 32-row chunk (a warp reads 32 adjacent
// columns of a row: coalesced), loading 8 rows before it adds them, and each column's chunks are
// added 8 loads at a time too. 128-row chunks left a GPU few threads, each waiting for one load at
// a time (0.03 of the copy at 256 rows on an H200, 0.58 at the widest; docs/PERFORMANCE.md).
// dy may be float or bf16 (the sums are fp32).
namespace detail {
template <Shape S>
inline constexpr int bias_chunk_rows = S == Shape::host ? 128 : 32;
// The floats of workspace bias_backward takes for dy(n, cols) in execution space E's natural
// shape: each chunk's column sums.
template <class E>
std::size_t bias_backward_workspace_floats(int n, int cols) {
  constexpr int rows = bias_chunk_rows<shape_for<Shape::natural, E>>;
  return std::size_t((n + rows - 1) / rows) * std::size_t(cols);
}
}  // namespace detail

template <Shape S0 = Shape::natural, class ExecSpace, class T>
void bias_backward(const ExecSpace& exec, DView<float*, ExecSpace> db, DView<const T**, ExecSpace> dy) {
  constexpr Shape S = shape_for<S0, ExecSpace>;
  constexpr int W = S == Shape::host ? 64 : 1;
  constexpr int kChunkRows = detail::bias_chunk_rows<S>;
  const int n = static_cast<int>(dy.extent(0)), cols = static_cast<int>(dy.extent(1));
  if (int(db.extent(0)) != cols) throw std::invalid_argument("bias_backward: db and dy disagree on `out`");
  if (n == 0 || cols == 0) return;
  const int chunks = (n + kChunkRows - 1) / kChunkRows, blocks = (cols + W - 1) / W;
  auto workspace = detail::GemmWorkspace<typename ExecSpace::memory_space>::get(std::size_t(chunks) * cols);
  float* part = workspace.first;  // (chunks, cols)
  Kokkos::parallel_for(
      "kformer::bias_backward_chunks", Kokkos::RangePolicy<ExecSpace>(exec, 0, chunks * blocks),
      KOKKOS_LAMBDA(const int item) {
        const int ch = item / blocks, j0 = (item % blocks) * W;
        const int r0 = ch * kChunkRows, r1 = n - r0 < kChunkRows ? n : r0 + kChunkRows;
        if (S == Shape::gpu) {  // (nvcc: a lambda may not first-capture inside if constexpr)
          part[std::size_t(ch) * cols + j0] = detail::add_in_order(0.0f, r1 - r0, [&](int i) { return float(dy(r0 + i, j0)); });
          return;
        }
        float acc[W] = {};
        if (cols - j0 >= W) {  // a full block: a fixed trip count the compiler vectorises
          for (int r = r0; r < r1; ++r)
            for (int j = 0; j < W; ++j) acc[j] += float(dy(r, j0 + j));
          for (int j = 0; j < W; ++j) part[std::size_t(ch) * cols + j0 + j] = acc[j];
        } else {
          const int w = cols - j0;
          for (int r = r0; r < r1; ++r)
            for (int j = 0; j < w; ++j) acc[j] += float(dy(r, j0 + j));
          for (int j = 0; j < w; ++j) part[std::size_t(ch) * cols + j0 + j] = acc[j];
        }
      });
  Kokkos::parallel_for(
      "kformer::bias_backward_sum", Kokkos::RangePolicy<ExecSpace>(exec, 0, cols), KOKKOS_LAMBDA(const int j) {
        db(j) += detail::add_in_order(0.0f, chunks, [&](int ch) { return part[std::size_t(ch) * cols + j]; });
      });
  detail::release_workspace(exec);  // the workspace goes to the next caller (gemm_workspace.hpp)
}

namespace detail {
// The packing workspace (floats) gemm() takes for C(M, N) over K with `impl`: the native GEMM's
// (gemm_native_workspace_floats); the vendor libraries keep theirs.
template <class ExecSpace, class T>
std::size_t gemm_workspace_floats(GemmImpl impl, std::int64_t M, std::int64_t N, std::int64_t K) {
  return impl == GemmImpl::native ? gemm_native_workspace_floats<ExecSpace, T>(int(M), int(N), int(K)) : 0;
}
// A GEMM call's record with the workspace it keeps (gemm_workspace.hpp), the most of its parts.
inline KernelCall keeping_workspace(KernelCall c, std::size_t floats) {
  c.kept[0] = {"kformer::gemm_workspace", 4.0 * double(floats)};
  return c;
}

// The record of y(m, n) = x(m, k) w(n, k)^T.
template <class ExecSpace, class Y, class X>
KernelCall forward_call(GemmImpl impl, const Y& y, const X& x, double bytes) {
  using T = std::remove_const_t<typename X::value_type>;
  KernelCall c = keeping_workspace(gemm_call(holds_bf16<X>, false, y.extent(0), y.extent(1), x.extent(1), 0, bytes),
                                   gemm_workspace_floats<ExecSpace, T>(impl, y.extent(0), y.extent(1), x.extent(1)));
  c.out_bytes = int(sizeof(typename Y::value_type));
  return c;
}

template <class ExecSpace, class T>
void matmul_backward_any(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> dx,
                         DView<float**, ExecSpace> dw, DView<float*, ExecSpace> db, DView<const T**, ExecSpace> dy,
                         DView<const T**, ExecSpace> x, DView<const T**, ExecSpace> w) {
  const Call call("matmul_backward", [&] {
    const std::int64_t n = dy.extent(0), out = dy.extent(1), in = dw.extent(1);
    std::size_t floats = gemm_workspace_floats<ExecSpace, T>(impl, out, in, n);  // dW
    if (dx.extent(0) != 0) floats = std::max(floats, gemm_workspace_floats<ExecSpace, T>(impl, n, in, out));
    if (db.extent(0) != 0) floats = std::max(floats, bias_backward_workspace_floats<ExecSpace>(int(n), int(out)));
    return keeping_workspace(
        gemm_call(holds_bf16<decltype(dy)>, true, n, out, in, (dx.extent(0) != 0 ? 1 : 0) | 2, bytes_of(dx, dw, db, dy, x, w)),
        floats);
  });
  if (call.described()) return;
  if (dx.extent(0) != 0) gemm(exec, impl, Op::N, Op::N, 1.0f, dy, w, 0.0f, dx);
  gemm(exec, impl, Op::T, Op::N, 1.0f, dy, x, 1.0f, dw);
  if (db.extent(0) != 0) bias_backward<Shape::natural, ExecSpace, T>(exec, db, dy);
}
}  // namespace detail

// y(N, out) = x(N, in) W(out, in)^T + b(out); b may be empty (no bias).
template <class ExecSpace>
void matmul_forward(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> y,
                    DView<const float**, ExecSpace> x, DView<const float**, ExecSpace> w,
                    DView<const float*, ExecSpace> b = {}) {
  const Call call("matmul_forward", [&] { return detail::forward_call<ExecSpace>(impl, y, x, bytes_of(y, x, w, b)); });
  if (call.described()) return;
  gemm(exec, impl, Op::N, Op::T, 1.0f, x, w, 0.0f, y, b);
}

// The same with x and W in bf16 (bf16 mixed precision): y and b stay fp32.
template <class ExecSpace>
void matmul_forward(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> y,
                    DView<const bf16**, ExecSpace> x, DView<const bf16**, ExecSpace> w,
                    DView<const float*, ExecSpace> b = {}) {
  const Call call("matmul_forward", [&] { return detail::forward_call<ExecSpace>(impl, y, x, bytes_of(y, x, w, b)); });
  if (call.described()) return;
  gemm(exec, impl, Op::N, Op::T, 1.0f, x, w, 0.0f, y, b);
}

// The first layer of a GPT MLP with its activation: y(N, out) = x W^T + b, the pre-activation
// the backward reads, and act(N, out) = gelu(y) (fused into the native GEMM's epilogue). Bitwise
// what matmul_forward then gelu_forward(act, y) give.
template <class ExecSpace>
void matmul_forward_gelu(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> y,
                         DView<float**, ExecSpace> act, DView<const float**, ExecSpace> x,
                         DView<const float**, ExecSpace> w, DView<const float*, ExecSpace> b = {}) {
  const Call call("matmul_forward_gelu", [&] { return detail::forward_call<ExecSpace>(impl, y, x, bytes_of(y, act, x, w, b)); });
  if (call.described()) return;
  gemm(exec, impl, Op::N, Op::T, 1.0f, x, w, 0.0f, y, GemmEpilogue<ExecSpace>{b, act});
}

// The same in bf16: act = gelu(bf16(y)) rounded to bf16, bitwise what a layer that keeps y in
// bf16 gets from gelu_forward on it.
template <class ExecSpace>
void matmul_forward_gelu(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> y,
                         DView<bf16**, ExecSpace> act, DView<const bf16**, ExecSpace> x,
                         DView<const bf16**, ExecSpace> w, DView<const float*, ExecSpace> b = {}) {
  const Call call("matmul_forward_gelu", [&] { return detail::forward_call<ExecSpace>(impl, y, x, bytes_of(y, act, x, w, b)); });
  if (call.described()) return;
  gemm(exec, impl, Op::N, Op::T, 1.0f, x, w, 0.0f, y, GemmEpilogue<ExecSpace, bf16>{b, act});
}

#if defined(KOKKOS_ENABLE_CUDA)
namespace detail {
// matmul_forward_stored's cuBLASLt call: y = bf16(x W^T + b) with the fp32 bias in the epilogue,
// or, with act, act = GELU of that sum and y beside it as the auxiliary output.
template <class Y>
LtGemm stored_lt_gemm(const Y& y, const Y& act, const DView<const bf16**, Kokkos::Cuda>& x,
                      const DView<const bf16**, Kokkos::Cuda>& w, const DView<const float*, Kokkos::Cuda>& b) {
  LtGemm g;
  g.trans_b = true, g.M = int(y.extent(0)), g.N = int(y.extent(1)), g.K = int(x.extent(1));
  g.ab = BlasType::bf16, g.d = BlasType::bf16;
  g.a = x.data(), g.b = w.data(), g.lda = int(x.stride_0()), g.ldb = int(w.stride_0()), g.bias = b.data();
  if (act.extent(0) != 0)
    g.epilogue = LtEpilogue::gelu_aux_bias, g.dp = act.data(), g.ldd = int(act.stride_0()), g.aux = y.data(),
    g.ldaux = std::int64_t(y.stride_0());
  else
    g.dp = y.data(), g.ldd = int(y.stride_0());
  return g;
}
}  // namespace detail
#endif

// Whether matmul_forward_stored writes y (and act) through cuBLASLt's epilogue for these views:
// the vendor GEMM under CUDA (or described as the CUDA build), a bias, shapes that agree, and an
// algorithm cuBLASLt has for them (a description takes it that cuBLASLt has one: it has bf16's
// bias and GELU epilogues on every GPU kformer builds for).
template <class ExecSpace>
bool stored_by_cublaslt(GemmImpl impl, const DView<bf16**, ExecSpace>& y, const DView<bf16**, ExecSpace>& act,
                        const DView<const bf16**, ExecSpace>& x, const DView<const bf16**, ExecSpace>& w,
                        const DView<const float*, ExecSpace>& b) {
  const bool has_act = act.extent(0) != 0;
  if (impl != GemmImpl::vendor || b.extent(0) == 0 || x.extent(0) != y.extent(0) || w.extent(0) != y.extent(1) ||
      w.extent(1) != x.extent(1) || b.extent(0) != y.extent(1) ||
      (has_act && (act.extent(0) != y.extent(0) || act.extent(1) != y.extent(1))))
    return false;
  if (described()) return described_as_cuda();
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value)
    return gemm_vendor_available<ExecSpace>() && detail::cublaslt_supports(detail::stored_lt_gemm(y, act, x, w, b));
#endif
  return false;
}

// A layer's output kept in bf16 (bf16 mixed precision): y(N, out) = bf16(x W^T + b), and, when
// act has extent, act = gelu(y) in bf16 (the GPT MLP's first layer). Where the GEMM writes bf16
// itself (gemm_writes_bf16: oneDNN on the host; cuBLAS for a layer without a bias) no fp32 C is
// made: the GELU then reads y, the same bits the fused epilogue gives (it rounds the result
// before the GELU). Elsewhere the fp32 y32 (N, out) takes the result and its epilogue, and a
// convert pass rounds it into y. Under CUDA with a bias, cuBLASLt's epilogue writes y and act
// where it has an algorithm for the shape: act is then the GELU of the fp32 sum, not of the
// rounded y (within a bf16 rounding of it), and cuBLASLt's GELU is its own.
template <class ExecSpace>
void matmul_forward_stored(const ExecSpace& exec, GemmImpl impl, DView<bf16**, ExecSpace> y,
                           DView<float**, ExecSpace> y32, DView<bf16**, ExecSpace> act,
                           DView<const bf16**, ExecSpace> x, DView<const bf16**, ExecSpace> w,
                           DView<const float*, ExecSpace> b = {}) {
  const bool has_act = act.extent(0) != 0;
  if (stored_by_cublaslt<ExecSpace>(impl, y, act, x, w, b)) {
    const Call call(has_act ? "matmul_forward_gelu" : "matmul_forward", [&] {
      return detail::forward_call<ExecSpace>(impl, y, x, bytes_of(y, act, x, w, b));
    });
    if (call.described()) return;
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value)
      if (detail::cublaslt_gemm(exec, detail::stored_lt_gemm(y, act, x, w, b))) return;
#endif
  }  // else (refused at launch) as without cuBLASLt
  if (!gemm_writes_bf16<ExecSpace>(impl, b.extent(0) != 0) || x.extent(1) == 0) {
    if (has_act)
      matmul_forward_gelu(exec, impl, y32, act, x, w, b);
    else
      matmul_forward(exec, impl, y32, x, w, b);
    convert(exec, y, y32);
    return;
  }
  const int M = int(y.extent(0)), N = int(y.extent(1)), K = int(x.extent(1));
  if (int(x.extent(0)) != M || int(w.extent(0)) != N || int(w.extent(1)) != K ||
      (b.extent(0) != 0 && int(b.extent(0)) != N) ||
      (has_act && (act.extent(0) != y.extent(0) || act.extent(1) != y.extent(1))))
    throw std::invalid_argument("matmul_forward_stored: shapes do not agree");
  {
    const Call call("matmul_forward", [&] { return detail::forward_call<ExecSpace>(impl, y, x, bytes_of(y, x, w, b)); });
    if (!call.described()) {
#if defined(KOKKOS_ENABLE_CUDA)
      if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value)
        detail::cublas_gemm_bf16_out(exec, false, true, M, N, K, x.data(), int(x.stride_0()), w.data(),
                                     int(w.stride_0()), y.data(), int(y.stride_0()));
      else
#endif
      if constexpr (runs_on_host<ExecSpace>) {
        exec.fence();  // oneDNN runs on the calling thread: earlier kernels on exec must be done
        detail::host_gemm_bf16_out(false, true, M, N, K, x.data(), int(x.stride_0()), w.data(), int(w.stride_0()),
                                   b.extent(0) ? b.data() : nullptr, y.data(), int(y.stride_0()));
      }
    }
  }
  if (has_act) gelu_forward(exec, act, DView<const bf16**, ExecSpace>(y));
}

// dx(N, in) = dy W (overwritten; skipped when dx is empty), dW(out, in) += dy^T x,
// db(out) += column sums of dy (skipped when db is empty).
template <class ExecSpace>
void matmul_backward(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> dx, DView<float**, ExecSpace> dw,
                     DView<float*, ExecSpace> db, DView<const float**, ExecSpace> dy,
                     DView<const float**, ExecSpace> x, DView<const float**, ExecSpace> w) {
  detail::matmul_backward_any<ExecSpace, float>(exec, impl, dx, dw, db, dy, x, w);
}

// The same with dy, x and W in bf16: dx, dW and db in fp32 (gradients accumulate in fp32).
template <class ExecSpace>
void matmul_backward(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> dx, DView<float**, ExecSpace> dw,
                     DView<float*, ExecSpace> db, DView<const bf16**, ExecSpace> dy,
                     DView<const bf16**, ExecSpace> x, DView<const bf16**, ExecSpace> w) {
  detail::matmul_backward_any<ExecSpace, bf16>(exec, impl, dx, dw, db, dy, x, w);
}

// dx(N, in) = dy(N, out) W(out, in): matmul_backward's input half alone, the same GEMM call
// (zb-h1's B; the weight half runs later as matmul_backward with an empty dx). T = float or bf16.
template <class ExecSpace, class T>
void matmul_backward_input(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> dx,
                           DView<const T**, ExecSpace> dy, DView<const T**, ExecSpace> w) {
  const Call call("matmul_backward_input", [&] {
    return detail::keeping_workspace(
        gemm_call(holds_bf16<decltype(dy)>, true, dy.extent(0), dy.extent(1), dx.extent(1), 1, bytes_of(dx, dy, w)),
        detail::gemm_workspace_floats<ExecSpace, T>(impl, dy.extent(0), dx.extent(1), dy.extent(1)));
  });
  if (call.described()) return;
  gemm(exec, impl, Op::N, Op::N, 1.0f, dy, w, 0.0f, dx);
}

}  // namespace kformer::kernels
