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

#include <stdexcept>
#include <string>
#include <type_traits>

#include "bf16.hpp"
#include "gemm_native.hpp"
#include "gemm_vendor.hpp"
#include "gemm_workspace.hpp"
#include "kformer_config.hpp"
#include "view_types.hpp"

namespace kformer::kernels {

enum class GemmImpl { native, vendor };

inline GemmImpl parse_gemm_impl(const std::string& name) {
  if (name == "native") return GemmImpl::native;
  if (name == "vendor") return GemmImpl::vendor;
  throw std::invalid_argument("unknown GEMM implementation '" + name + "': use native or vendor");
}
inline const char* to_string(GemmImpl impl) { return impl == GemmImpl::native ? "native" : "vendor"; }

// Whether `vendor` can run on ExecSpace in this build.
template <class ExecSpace>
constexpr bool gemm_vendor_available() {
#if defined(KOKKOS_ENABLE_CUDA)
  if (std::is_same<ExecSpace, Kokkos::Cuda>::value) return KFORMER_HAVE_CUBLAS != 0;
#endif
  return KFORMER_HAVE_CBLAS != 0 && runs_on_host<ExecSpace>;
}

enum class Op { N, T };  // op(A) = A or A^T

namespace detail {
// C(i, j) = bias(j) (overwrite) or C(i, j) += bias(j), for C (M,N) with leading dimension ldc.
template <class ExecSpace>
void gemm_bias_rows(const ExecSpace& exec, int M, int N, float* c, std::int64_t ldc, const float* bias,
                    bool overwrite) {
  Kokkos::parallel_for(
      "kformer::gemm_vendor_bias", Kokkos::RangePolicy<ExecSpace>(exec, 0, M), KOKKOS_LAMBDA(const int i) {
        float* ci = c + i * ldc;
        if (overwrite)
          for (int j = 0; j < N; ++j) ci[j] = bias[j];
        else
          for (int j = 0; j < N; ++j) ci[j] += bias[j];
      });
}
}  // namespace detail

namespace detail {
// gemm() for A of TA and B of TB (float or bf16; the vendor path takes both the same).
template <class ExecSpace, class TA, class TB>
void gemm_any(const ExecSpace& exec, GemmImpl impl, Op op_a, Op op_b, float alpha, DView<const TA**, ExecSpace> a,
              DView<const TB**, ExecSpace> b, float beta, DView<float**, ExecSpace> c,
              DView<const float*, ExecSpace> bias) {
  static_assert(std::is_same<TA, TB>::value, "gemm: give A and B the same element type");
  constexpr bool is_bf16 = std::is_same<TA, bf16>::value;
  const bool ta = op_a == Op::T, tb = op_b == Op::T;
  const int M = static_cast<int>(c.extent(0)), N = static_cast<int>(c.extent(1));
  const int K = static_cast<int>(ta ? a.extent(0) : a.extent(1));
  if (int(ta ? a.extent(1) : a.extent(0)) != M || int(tb ? b.extent(1) : b.extent(0)) != K ||
      int(tb ? b.extent(0) : b.extent(1)) != N || (bias.extent(0) != 0 && int(bias.extent(0)) != N))
    throw std::invalid_argument("gemm: shapes do not agree: C(" + std::to_string(M) + "," + std::to_string(N) +
                                ") = op(A)(" + std::to_string(a.extent(0)) + "," + std::to_string(a.extent(1)) +
                                ") op(B)(" + std::to_string(b.extent(0)) + "," + std::to_string(b.extent(1)) +
                                ") + bias(" + std::to_string(bias.extent(0)) + ")");
  const std::int64_t lda = a.stride_0(), ldb = b.stride_0(), ldc = c.stride_0();
  const float* bias_ptr = bias.extent(0) ? bias.data() : nullptr;
  if (impl == GemmImpl::native) {
    gemm_native_raw(exec, M, N, K, alpha, a.data(), ta ? 1 : lda, ta ? lda : 1, b.data(), tb ? 1 : ldb,
                    tb ? ldb : 1, beta, c.data(), ldc, bias_ptr);
    return;
  }
  if (M == 0 || N == 0) return;
  // The bias: with beta == 0, written into C first and the sgemm run with beta = 1, so that it
  // costs one write pass (the sgemm reads C where it writes it anyway) instead of a read-modify-
  // write pass over C after the sgemm; with beta != 0 (or K == 0), added after. Rows in parallel,
  // columns contiguous.
  const bool bias_first = bias_ptr && beta == 0.0f && K > 0;
  if (bias_first) {
    detail::gemm_bias_rows(exec, M, N, c.data(), ldc, bias_ptr, true);
    beta = 1.0f;
  }
  if (K == 0) {  // BLAS leaves C alone when K == 0 and beta == 0 (C may hold NaN): write 0 first
    if (beta == 0.0f) Kokkos::deep_copy(exec, c, 0.0f);
  } else {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
      if constexpr (is_bf16)
        detail::cublas_gemm_bf16_rowmajor(exec, ta, tb, M, N, K, alpha, a.data(), int(lda), b.data(), int(ldb),
                                          beta, c.data(), int(ldc));
      else
        detail::cublas_sgemm_rowmajor(exec, ta, tb, M, N, K, alpha, a.data(), int(lda), b.data(), int(ldb), beta,
                                      c.data(), int(ldc));
    } else
#endif
    {
      if constexpr (!runs_on_host<ExecSpace>) {
        throw std::runtime_error(std::string("kernels.gemm=vendor has no BLAS for execution space ") +
                                 ExecSpace::name() + ": use kernels.gemm=native");
      } else {
        exec.fence();  // BLAS runs on the calling thread: earlier kernels on exec must be done
        if constexpr (is_bf16)
          detail::host_gemm_bf16_rowmajor(ta, tb, M, N, K, alpha, a.data(), int(lda), b.data(), int(ldb), beta,
                                          c.data(), int(ldc));
        else
          detail::cblas_sgemm_rowmajor(ta, tb, M, N, K, alpha, a.data(), int(lda), b.data(), int(ldb), beta,
                                       c.data(), int(ldc));
      }
    }
  }
  if (bias_ptr && !bias_first) detail::gemm_bias_rows(exec, M, N, c.data(), ldc, bias_ptr, false);
}
}  // namespace detail

// C(M,N) = alpha op(A) op(B) + beta C, plus bias(N) on every row when bias has extent N.
// A is stored (M,K) for Op::N and (K,M) for Op::T; likewise B (K,N) or (N,K). beta == 0 never
// reads C.
template <class ExecSpace>
void gemm(const ExecSpace& exec, GemmImpl impl, Op op_a, Op op_b, float alpha, DView<const float**, ExecSpace> a,
          DView<const float**, ExecSpace> b, float beta, DView<float**, ExecSpace> c,
          DView<const float*, ExecSpace> bias = {}) {
  detail::gemm_any<ExecSpace, float, float>(exec, impl, op_a, op_b, alpha, a, b, beta, c, bias);
}

// The same with A and B in bf16: products exact in fp32, accumulated in fp32, C in fp32.
template <class ExecSpace>
void gemm(const ExecSpace& exec, GemmImpl impl, Op op_a, Op op_b, float alpha, DView<const bf16**, ExecSpace> a,
          DView<const bf16**, ExecSpace> b, float beta, DView<float**, ExecSpace> c,
          DView<const float*, ExecSpace> bias = {}) {
  detail::gemm_any<ExecSpace, bf16, bf16>(exec, impl, op_a, op_b, alpha, a, b, beta, c, bias);
}

// db(out) += column sums of dy(N, out). Deterministic on every backend: the rows are cut into
// chunks of a fixed size (never a function of the thread count), each chunk's column sums go to a
// workspace, then each column adds its chunks in order. A work item sums W adjacent columns of
// one chunk: W = 64 on the host (contiguous, vectorised reads of each row), 1 on a GPU (a warp
// reads 32 adjacent columns of a row: coalesced, and chunks x columns threads to fill the device).
// dy may be float or bf16 (the sums are fp32).
template <class ExecSpace, class T>
void bias_backward(const ExecSpace& exec, DView<float*, ExecSpace> db, DView<const T**, ExecSpace> dy) {
  constexpr int W = runs_on_host<ExecSpace> ? 64 : 1;
  constexpr int kChunkRows = 128;
  const int n = static_cast<int>(dy.extent(0)), cols = static_cast<int>(dy.extent(1));
  if (int(db.extent(0)) != cols) throw std::invalid_argument("bias_backward: db and dy disagree on `out`");
  if (n == 0 || cols == 0) return;
  const int chunks = (n + kChunkRows - 1) / kChunkRows, blocks = (cols + W - 1) / W;
  auto workspace =
      detail::GemmWorkspace<typename ExecSpace::memory_space>::get(std::size_t(chunks) * std::size_t(cols));
  float* part = workspace.first;  // (chunks, cols)
  Kokkos::parallel_for(
      "kformer::bias_backward_chunks", Kokkos::RangePolicy<ExecSpace>(exec, 0, chunks * blocks),
      KOKKOS_LAMBDA(const int item) {
        const int ch = item / blocks, j0 = (item % blocks) * W;
        const int r0 = ch * kChunkRows, r1 = n - r0 < kChunkRows ? n : r0 + kChunkRows;
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
        float s = 0.0f;
        for (int ch = 0; ch < chunks; ++ch) s += part[std::size_t(ch) * cols + j];
        db(j) += s;
      });
  exec.fence();  // the workspace is released to the next caller
}

namespace detail {
template <class ExecSpace, class T>
void matmul_backward_any(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> dx,
                         DView<float**, ExecSpace> dw, DView<float*, ExecSpace> db, DView<const T**, ExecSpace> dy,
                         DView<const T**, ExecSpace> x, DView<const T**, ExecSpace> w) {
  if (dx.extent(0) != 0) gemm(exec, impl, Op::N, Op::N, 1.0f, dy, w, 0.0f, dx);
  gemm(exec, impl, Op::T, Op::N, 1.0f, dy, x, 1.0f, dw);
  if (db.extent(0) != 0) bias_backward<ExecSpace, T>(exec, db, dy);
}
}  // namespace detail

// y(N, out) = x(N, in) W(out, in)^T + b(out); b may be empty (no bias).
template <class ExecSpace>
void matmul_forward(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> y,
                    DView<const float**, ExecSpace> x, DView<const float**, ExecSpace> w,
                    DView<const float*, ExecSpace> b = {}) {
  gemm(exec, impl, Op::N, Op::T, 1.0f, x, w, 0.0f, y, b);
}

// The same with x and W in bf16 (bf16 mixed precision): y and b stay fp32.
template <class ExecSpace>
void matmul_forward(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> y,
                    DView<const bf16**, ExecSpace> x, DView<const bf16**, ExecSpace> w,
                    DView<const float*, ExecSpace> b = {}) {
  gemm(exec, impl, Op::N, Op::T, 1.0f, x, w, 0.0f, y, b);
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

}  // namespace kformer::kernels
