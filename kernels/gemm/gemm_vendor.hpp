// The vendor GEMM behind `kernels.gemm=vendor`: CBLAS (OpenBLAS) for host memory, cuBLAS on the
// execution space's stream under CUDA (cuBLASLt where a bias or GELU goes in its epilogue); with
// bf16 operands, oneDNN's matmul on the host (gemm_dnnl.hpp) and cublasGemmEx under CUDA.
// Row-major, like the rest of kformer. Non-template entry points, compiled once in
// gemm_vendor.cpp so that no caller includes cblas.h/dnnl.hpp/cublas.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "bf16.hpp"
#include "kformer_config.hpp"

namespace kformer::kernels::detail {

// C(M,N) = alpha op(A)(M,K) op(B)(K,N) + beta C, all row-major with leading dimensions
// lda, ldb, ldc of the stored (not transposed) matrices. Throws std::runtime_error naming the
// fix when this build has no CBLAS.
void cblas_sgemm_rowmajor(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* a, int lda,
                          const float* b, int ldb, float beta, float* c, int ldc);

// The same with A and B in bf16, accumulated in fp32 into fp32 C. oneDNN's bf16 matmul where
// this build has oneDNN (KFORMER_ENABLE_DNNL) and this CPU runs it (oneDNN 2.6 needs AVX-512 for
// bf16); otherwise the operands widened to fp32 (exactly) and cblas_sgemm, which gives the same
// products and fp32 sums. host_gemm_bf16_library() names the one that ran last.
void host_gemm_bf16_rowmajor(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* a, int lda,
                             const bf16* b, int ldb, float beta, float* c, int ldc);
const char* host_gemm_bf16_library();
// Whether to try oneDNN first (default true); tests set it false to run the CBLAS path here too.
bool& host_gemm_bf16_try_dnnl();

// C(M,N) = bf16(op(A) op(B) + bias), A and B in bf16, the sums and the bias in fp32 and C rounded
// once to nearest even: oneDNN's matmul with the bias in its epilogue and a bf16 destination, so
// that no fp32 C is written, re-read and converted. bias: nullptr or N floats. Only where
// host_gemm_writes_bf16() (oneDNN built, its bf16 matmul runs on this CPU, try_dnnl set);
// throws otherwise.
void host_gemm_bf16_out(bool trans_a, bool trans_b, int M, int N, int K, const bf16* a, int lda, const bf16* b,
                        int ldb, const float* bias, bf16* c, int ldc);
bool host_gemm_writes_bf16();

// A strided batch of row-major GEMMs, C_i = alpha op(A_i) op(B_i) + beta C_i for i < count, with
// A_i = a + i * stride_a (elements) and likewise B_i, C_i; the element types given at run time
// (A and B alike: fp32 or bf16; C fp32 or bf16), every sum fp32. The batched attention's products
// (attention_batched.hpp).
enum class BlasType { f32, bf16 };
struct StridedGemm {
  bool trans_a = false, trans_b = false;
  int M = 0, N = 0, K = 0;
  float alpha = 1.f, beta = 0.f;
  BlasType ab = BlasType::f32, c = BlasType::f32;
  const void* a = nullptr;
  const void* b = nullptr;
  void* cp = nullptr;
  int lda = 0, ldb = 0, ldc = 0;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  int count = 1;
};
// On the host: bf16 operands as one oneDNN matmul over the batch, C written in its type (one
// primitive per kind of call, kept: gemm_dnnl.hpp); fp32 operands, or where oneDNN does not run,
// a CBLAS call a matrix, a bf16 C through an fp32 copy rounded once. Throws naming the fix when
// this build has no CBLAS.
void host_gemm_strided(const StridedGemm& g);

#if defined(KOKKOS_ENABLE_CUDA)
// cublasGemmStridedBatchedEx on `exec`'s stream (CUBLAS_COMPUTE_32F: no TF32 for fp32 operands).
void cublas_gemm_strided(const Kokkos::Cuda& exec, const StridedGemm& g);
// The same on `exec`'s stream with cuBLAS (asynchronous, like a Kokkos kernel on `exec`).
void cublas_sgemm_rowmajor(const Kokkos::Cuda& exec, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                           const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
// bf16 A and B, fp32 compute and C: cublasGemmEx (CUDA_R_16BF in, CUBLAS_COMPUTE_32F, CUDA_R_32F out).
void cublas_gemm_bf16_rowmajor(const Kokkos::Cuda& exec, bool trans_a, bool trans_b, int M, int N, int K,
                               float alpha, const bf16* a, int lda, const bf16* b, int ldb, float beta, float* c,
                               int ldc);
// bf16 A and B, fp32 compute, C written in bf16 (rounded once): cublasGemmEx with a CUDA_R_16BF C.
void cublas_gemm_bf16_out(const Kokkos::Cuda& exec, bool trans_a, bool trans_b, int M, int N, int K, const bf16* a,
                          int lda, const bf16* b, int ldb, bf16* c, int ldc);

// cuBLASLt's fused epilogues (gemm_cublaslt.cpp) on a row-major D(M,N) = op(A) op(B) (no beta):
// `bias`, D = sums + bias(n); `gelu_aux_bias`, aux = sums + bias(n) (the pre-activation the
// backward reads) and D = GELU(aux) (cuBLASLt's tanh GELU of the fp32 value, then rounded to D's
// type); `dgelu_bgrad`, D = sums * GELU'(aux) (aux: the pre-activation, read) and bias(n) = the
// column sums of D, written in D's type (overwritten, not added). The forward's bias stays fp32
// (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) where D is bf16. A and B are of type ab, D and aux of type
// d; leading dimensions as stored.
enum class LtEpilogue { bias, gelu_aux_bias, dgelu_bgrad };
struct LtGemm {
  bool trans_a = false, trans_b = false;
  int M = 0, N = 0, K = 0;
  BlasType ab = BlasType::f32, d = BlasType::f32;
  const void* a = nullptr;
  const void* b = nullptr;
  void* dp = nullptr;
  int lda = 0, ldb = 0, ldd = 0;
  LtEpilogue epilogue = LtEpilogue::bias;
  const void* bias = nullptr;  // N floats read (bias, gelu_aux_bias), or N of type d written (dgelu_bgrad)
  void* aux = nullptr;         // the GELU epilogues: (M, N) of type d, leading dimension ldaux (a multiple of 8)
  std::int64_t ldaux = 0;
};
// Whether cuBLASLt has an algorithm for g on this GPU (its heuristic, asked once per shape, types,
// epilogue and alignment); false for an empty GEMM, a missing bias, an auxiliary leading
// dimension cuBLASLt does not take, or cublaslt_epilogues_on() false.
bool cublaslt_supports(const LtGemm& g);
// Runs g on exec's stream and returns true, or returns false having run nothing where
// cublaslt_supports(g) is false or cuBLASLt refuses the launch (CUBLAS_STATUS_NOT_SUPPORTED; the
// plan is then dropped): the caller then runs the GEMM and its epilogue passes.
bool cublaslt_gemm(const Kokkos::Cuda& exec, const LtGemm& g);
// Whether to use cuBLASLt's epilogues at all (default true); the kernel bench sets it false to
// time the passes they replace, tests to run both.
bool& cublaslt_epilogues_on();
#endif

}  // namespace kformer::kernels::detail
