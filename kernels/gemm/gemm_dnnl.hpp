// oneDNN's bf16 matmul behind the host vendor GEMM (gemm_vendor.cpp): one primitive per shape,
// strides, types and epilogue, built the first time it is asked for and kept, so that the
// attention's many small products (a batch of heads per call) do not each pay for a primitive
// descriptor. Internal to kformer_kernels: only gemm_vendor.cpp calls it, and only this file's
// .cpp includes dnnl.hpp.
#pragma once

#include "bf16.hpp"

namespace kformer::kernels::detail {

// A strided batch of row-major GEMMs with bf16 A and B and fp32 sums: for i < count,
// C_i = alpha op(A_i)(M,K) op(B_i)(K,N) + beta C_i (+ bias(n)), A_i = a + i * stride_a elements
// and likewise B_i and C_i, leading dimensions of the stored (not transposed) matrices. C is
// fp32, or bf16 rounded once from the fp32 result (beta then reads the bf16 C). A bias is an fp32
// row of N, taken with alpha == 1 only (oneDNN adds it before the scale).
struct DnnlGemm {
  bool trans_a = false, trans_b = false;
  int M = 0, N = 0, K = 0, count = 1;
  int lda = 0, ldb = 0, ldc = 0;
  long long stride_a = 0, stride_b = 0, stride_c = 0;
  float alpha = 1.f, beta = 0.f;
  bool c_bf16 = false;
  bool bias = false;
};

// Runs g and returns true; returns false having run nothing where this build has no oneDNN or
// oneDNN has no such matmul on this CPU but its reference kernel (oneDNN 2.6's bf16 matmul needs
// AVX-512); the refusal is kept per primitive. With beta == 0, alpha is a post-op of the sums,
// not oneDNN's output scale, which its 2.6 GEMM applies at about a fifth of the speed
// (docs/PERFORMANCE.md, the CPU's bf16 attention).
bool dnnl_gemm(const DnnlGemm& g, const bf16* a, const bf16* b, const float* bias, void* c);

// Whether oneDNN builds a small bf16 matmul of this kind on this CPU (asked once per kind).
bool dnnl_gemm_runs(bool c_bf16, bool bias);

}  // namespace kformer::kernels::detail
