// CBLAS, oneDNN (through gemm_dnnl.cpp) and cuBLAS calls behind the vendor GEMM (see gemm_vendor.hpp).
#include "gemm_vendor.hpp"

#include "gemm_dnnl.hpp"

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#if KFORMER_HAVE_CBLAS
#include <cblas.h>
#endif
#if KFORMER_HAVE_CUBLAS && defined(KOKKOS_ENABLE_CUDA)
#include <cublas_v2.h>
#endif

namespace kformer::kernels::detail {

void cblas_sgemm_rowmajor(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* a, int lda,
                          const float* b, int ldb, float beta, float* c, int ldc) {
#if KFORMER_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
              alpha, a, lda, b, ldb, beta, c, ldc);
#else
  (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb,
      (void)beta, (void)c, (void)ldc;
  throw std::runtime_error(
      "kernels.gemm=vendor needs CBLAS on the host, but this kformer was built without it: install "
      "libopenblas-dev and reconfigure with -DKFORMER_ENABLE_BLAS=ON, or use kernels.gemm=native");
#endif
}

namespace {

// Which library ran the last host bf16 GEMM (for reports and tests).
std::atomic<const char*> g_bf16_library{"none yet"};

// The operand widened to fp32, stored as given (rows x cols with leading dimension ld).
std::vector<float> widen(const bf16* x, int rows, int cols, int ld) {
  std::vector<float> out(std::size_t(rows) * std::size_t(ld));
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < cols; ++k) out[std::size_t(r) * ld + k] = float(x[std::size_t(r) * ld + k]);
  return out;
}

}  // namespace

bool host_gemm_writes_bf16() {
  // Asked once: whether oneDNN builds a bf16-in, bf16-out matmul with a bias on this CPU.
  static const bool runs = dnnl_gemm_runs(true, true);
  return runs && host_gemm_bf16_try_dnnl();
}

void host_gemm_bf16_out(bool trans_a, bool trans_b, int M, int N, int K, const bf16* a, int lda, const bf16* b,
                        int ldb, const float* bias, bf16* c, int ldc) {
  if (!host_gemm_writes_bf16())
    throw std::logic_error("host_gemm_bf16_out: oneDNN's bf16 matmul is not usable here (see host_gemm_writes_bf16)");
  DnnlGemm g;
  g.trans_a = trans_a, g.trans_b = trans_b, g.M = M, g.N = N, g.K = K, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
  g.c_bf16 = true, g.bias = bias != nullptr;
  if (!dnnl_gemm(g, a, b, bias, c))
    throw std::logic_error("host_gemm_bf16_out: oneDNN refused a bf16 matmul it built for the probe");
  g_bf16_library = "oneDNN matmul (bf16, bias and bf16 output in its epilogue)";
}

void host_gemm_bf16_rowmajor(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* a, int lda,
                             const bf16* b, int ldb, float beta, float* c, int ldc) {
  DnnlGemm g;
  g.trans_a = trans_a, g.trans_b = trans_b, g.M = M, g.N = N, g.K = K, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
  g.alpha = alpha, g.beta = beta;
  if (host_gemm_bf16_try_dnnl() && dnnl_gemm(g, a, b, nullptr, c)) {
    g_bf16_library = "oneDNN matmul (bf16)";
    return;
  }
#if KFORMER_HAVE_CBLAS
  // bf16 -> fp32 is exact, so sgemm gives the products and fp32 sums a bf16 GEMM would.
  const std::vector<float> wa = widen(a, trans_a ? K : M, trans_a ? M : K, lda);
  const std::vector<float> wb = widen(b, trans_b ? N : K, trans_b ? K : N, ldb);
  cblas_sgemm_rowmajor(trans_a, trans_b, M, N, K, alpha, wa.data(), lda, wb.data(), ldb, beta, c, ldc);
  g_bf16_library = "OpenBLAS sgemm on fp32 copies";
#else
  (void)widen;
  throw std::runtime_error(
      "kernels.gemm=vendor in bf16 needs oneDNN (libdnnl-dev, with AVX-512) or CBLAS on the host, and this "
      "kformer has neither usable: install libdnnl-dev or libopenblas-dev and reconfigure, or use kernels.gemm=native");
#endif
}

namespace {
// The batch as one oneDNN matmul over bf16 operands (C fp32 or bf16, written directly); false
// where oneDNN does not run it here.
bool dnnl_strided(const StridedGemm& g) {
  if (g.ab != BlasType::bf16 || !host_gemm_bf16_try_dnnl()) return false;
  DnnlGemm d;
  d.trans_a = g.trans_a, d.trans_b = g.trans_b, d.M = g.M, d.N = g.N, d.K = g.K, d.count = g.count;
  d.lda = g.lda, d.ldb = g.ldb, d.ldc = g.ldc, d.stride_a = g.stride_a, d.stride_b = g.stride_b;
  d.stride_c = g.stride_c, d.alpha = g.alpha, d.beta = g.beta, d.c_bf16 = g.c == BlasType::bf16;
  if (!dnnl_gemm(d, static_cast<const bf16*>(g.a), static_cast<const bf16*>(g.b), nullptr, g.cp)) return false;
  g_bf16_library = "oneDNN matmul (bf16)";
  return true;
}
}  // namespace

void host_gemm_strided(const StridedGemm& g) {
  if (g.count <= 0 || dnnl_strided(g)) return;
  // Otherwise a GEMM a matrix; a bf16 C through an fp32 copy, rounded once.
  const std::size_t c_elems = std::size_t(g.M - 1) * std::size_t(g.ldc) + std::size_t(g.N);
  std::vector<float> c32(g.c == BlasType::bf16 ? c_elems : 0);
  for (int i = 0; i < g.count; ++i) {
    const std::size_t oa = std::size_t(i) * std::size_t(g.stride_a), ob = std::size_t(i) * std::size_t(g.stride_b),
                      oc = std::size_t(i) * std::size_t(g.stride_c);
    float* c = g.c == BlasType::f32 ? static_cast<float*>(g.cp) + oc : c32.data();
    bf16* c16 = g.c == BlasType::bf16 ? static_cast<bf16*>(g.cp) + oc : nullptr;
    if (c16 && g.beta != 0.f)
      for (int r = 0; r < g.M; ++r)
        for (int n = 0; n < g.N; ++n) c[std::size_t(r) * g.ldc + n] = float(c16[std::size_t(r) * g.ldc + n]);
    if (g.ab == BlasType::f32)
      cblas_sgemm_rowmajor(g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, static_cast<const float*>(g.a) + oa, g.lda,
                           static_cast<const float*>(g.b) + ob, g.ldb, g.beta, c, g.ldc);
    else
      host_gemm_bf16_rowmajor(g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, static_cast<const bf16*>(g.a) + oa,
                              g.lda, static_cast<const bf16*>(g.b) + ob, g.ldb, g.beta, c, g.ldc);
    if (c16)
      for (int r = 0; r < g.M; ++r)
        for (int n = 0; n < g.N; ++n) c16[std::size_t(r) * g.ldc + n] = bf16(c[std::size_t(r) * g.ldc + n]);
  }
}

const char* host_gemm_bf16_library() { return g_bf16_library; }
bool& host_gemm_bf16_try_dnnl() {
  static bool on = true;
  return on;
}

#if defined(KOKKOS_ENABLE_CUDA)
#if KFORMER_HAVE_CUBLAS
namespace {
// One handle per process, deliberately never destroyed: a static destructor would run after the
// CUDA runtime has shut down. Set to `exec`'s stream for each call.
cublasHandle_t cublas_handle(const Kokkos::Cuda& exec) {
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed: is a GPU visible?");
    return h;
  }();
  cublasSetStream(handle, exec.cuda_stream());
  return handle;
}
}  // namespace
#endif

void cublas_sgemm_rowmajor(const Kokkos::Cuda& exec, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                           const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
#if KFORMER_HAVE_CUBLAS
  cublasHandle_t handle = cublas_handle(exec);
  // cuBLAS is column-major: the row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T,
  // so swap the operands (and M with N) and keep each one's transposition flag.
  const cublasStatus_t st =
      cublasSgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
                  b, ldb, a, lda, &beta, c, ldc);
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasSgemm failed with status " + std::to_string(static_cast<int>(st)));
#else
  (void)exec, (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)a, (void)lda, (void)b,
      (void)ldb, (void)beta, (void)c, (void)ldc;
  throw std::runtime_error(
      "kernels.gemm=vendor needs cuBLAS under CUDA, but this kformer was built without it: reconfigure with "
      "-DKFORMER_ENABLE_BLAS=ON, or use kernels.gemm=native");
#endif
}

namespace {
// cublasGemmEx with bf16 A and B, fp32 compute, C of ctype (fp32 or bf16): row-major C = op(A)
// op(B) as column-major C^T = op(B)^T op(A)^T, as in cublas_sgemm_rowmajor. bf16 is 16 raw bits,
// the layout of __nv_bfloat16, so the pointers go as they are.
void gemm_ex_bf16(const Kokkos::Cuda& exec, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                  const bf16* a, int lda, const bf16* b, int ldb, float beta, void* c, bool c_bf16, int ldc) {
#if KFORMER_HAVE_CUBLAS
  const cublasStatus_t st = cublasGemmEx(
      cublas_handle(exec), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
      b, CUDA_R_16BF, ldb, a, CUDA_R_16BF, lda, &beta, c, c_bf16 ? CUDA_R_16BF : CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cublasGemmEx (bf16 inputs, fp32 compute, ") + (c_bf16 ? "bf16" : "fp32") +
                             " output) failed with status " + std::to_string(static_cast<int>(st)));
#else
  (void)exec, (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)a, (void)lda, (void)b,
      (void)ldb, (void)beta, (void)c, (void)c_bf16, (void)ldc;
  throw std::runtime_error(
      "kernels.gemm=vendor needs cuBLAS under CUDA, but this kformer was built without it: reconfigure with "
      "-DKFORMER_ENABLE_BLAS=ON, or use kernels.gemm=native");
#endif
}
}  // namespace

void cublas_gemm_bf16_rowmajor(const Kokkos::Cuda& exec, bool trans_a, bool trans_b, int M, int N, int K,
                               float alpha, const bf16* a, int lda, const bf16* b, int ldb, float beta, float* c,
                               int ldc) {
  gemm_ex_bf16(exec, trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, false, ldc);
}

void cublas_gemm_bf16_out(const Kokkos::Cuda& exec, bool trans_a, bool trans_b, int M, int N, int K, const bf16* a,
                          int lda, const bf16* b, int ldb, bf16* c, int ldc) {
  gemm_ex_bf16(exec, trans_a, trans_b, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, true, ldc);
}

void cublas_gemm_strided(const Kokkos::Cuda& exec, const StridedGemm& g) {
#if KFORMER_HAVE_CUBLAS
  // Column-major as in cublas_sgemm_rowmajor: C_i^T = op(B_i)^T op(A_i)^T.
  const cudaDataType ab = g.ab == BlasType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType c = g.c == BlasType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasStatus_t st = cublasGemmStridedBatchedEx(
      cublas_handle(exec), g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.N, g.M,
      g.K, &g.alpha, g.b, ab, g.ldb, g.stride_b, g.a, ab, g.lda, g.stride_a, &g.beta, g.cp, c, g.ldc, g.stride_c,
      g.count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasGemmStridedBatchedEx failed with status " + std::to_string(static_cast<int>(st)));
#else
  (void)exec, (void)g;
  throw std::runtime_error(
      "kernels.attention=batched_gemm needs cuBLAS under CUDA, but this kformer was built without it: reconfigure "
      "with -DKFORMER_ENABLE_BLAS=ON, or use kernels.attention=fused");
#endif
}
#endif

}  // namespace kformer::kernels::detail
