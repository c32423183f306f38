// The vendor GEMM behind `kernels.gemm=vendor`: CBLAS (OpenBLAS) for host memory, cuBLAS on the
// execution space's stream under CUDA. Row-major, like the rest of kformer. Non-template
// entry points, compiled once in gemm_vendor.cpp so that no caller includes cblas.h/cublas.
#pragma once

#include <Kokkos_Core.hpp>

#include "kformer_config.hpp"

namespace kformer::kernels::detail {

// C(M,N) = alpha op(A)(M,K) op(B)(K,N) + beta C, all row-major with leading dimensions
// lda, ldb, ldc of the stored (not transposed) matrices. Throws std::runtime_error naming the
// fix when this build has no CBLAS.
void cblas_sgemm_rowmajor(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* a, int lda,
                          const float* b, int ldb, float beta, float* c, int ldc);

#if defined(KOKKOS_ENABLE_CUDA)
// The same on `exec`'s stream with cuBLAS (asynchronous, like a Kokkos kernel on `exec`).
void cublas_sgemm_rowmajor(const Kokkos::Cuda& exec, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                           const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
#endif

}  // namespace kformer::kernels::detail
