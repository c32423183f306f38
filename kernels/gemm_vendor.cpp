// CBLAS and cuBLAS calls behind the vendor GEMM (see gemm_vendor.hpp).
#include "gemm_vendor.hpp"

#include <stdexcept>
#include <string>

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

#if defined(KOKKOS_ENABLE_CUDA)
void cublas_sgemm_rowmajor(const Kokkos::Cuda& exec, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                           const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
#if KFORMER_HAVE_CUBLAS
  // One handle per process, deliberately never destroyed: a static destructor would run after
  // the CUDA runtime has shut down.
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed: is a GPU visible?");
    return h;
  }();
  cublasSetStream(handle, exec.cuda_stream());
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
#endif

}  // namespace kformer::kernels::detail
