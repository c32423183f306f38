// CBLAS, oneDNN and cuBLAS calls behind the vendor GEMM (see gemm_vendor.hpp).
#include "gemm_vendor.hpp"

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#if KFORMER_HAVE_CBLAS
#include <cblas.h>
#endif
#if KFORMER_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
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

#if KFORMER_HAVE_DNNL
dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// oneDNN's matmul with strides for the transpositions: dst = alpha src weights (+ beta dst). False
// when oneDNN has no bf16 matmul on this CPU (oneDNN 2.6 needs AVX-512; it then says so once).
bool dnnl_gemm_bf16(bool ta, bool tb, int M, int N, int K, float alpha, const bf16* a, int lda, const bf16* b,
                    int ldb, float beta, float* c, int ldc) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  static std::atomic<bool> unsupported{false};
  if (unsupported) return false;
  dnnl::engine& engine = dnnl_engine();
  // op(A)(m, k) = a[m * lda + k] or a[k * lda + m]; op(B)(k, n) = b[k * ldb + n] or b[n * ldb + k].
  const dnnl::memory::desc a_md(dims{M, K}, dt::bf16, ta ? dims{1, lda} : dims{lda, 1});
  const dnnl::memory::desc b_md(dims{K, N}, dt::bf16, tb ? dims{1, ldb} : dims{ldb, 1});
  const dnnl::memory::desc c_md(dims{M, N}, dt::f32, dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {  // beta == 0 never reads C (it may hold NaN)
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
  } catch (const dnnl::error& e) {
    if (e.status != dnnl_unimplemented) throw;
    unsupported = true;
    return false;
  }
  dnnl::stream stream(engine);
  dnnl::memory am(a_md, engine, const_cast<bf16*>(a)), bm(b_md, engine, const_cast<bf16*>(b)), cm(c_md, engine, c);
  dnnl::matmul(pd).execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream.wait();
  return true;
}

// The primitive of dnnl_gemm_bf16_out: bf16 sources, an fp32 bias row (when given), bf16
// destination. Throws dnnl::error (dnnl_unimplemented where this CPU has no bf16 matmul).
dnnl::matmul::primitive_desc bf16_out_desc(const dnnl::engine& engine, bool ta, bool tb, int M, int N, int K,
                                           int lda, int ldb, bool bias, int ldc) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  const dnnl::memory::desc a_md(dims{M, K}, dt::bf16, ta ? dims{1, lda} : dims{lda, 1});
  const dnnl::memory::desc b_md(dims{K, N}, dt::bf16, tb ? dims{1, ldb} : dims{ldb, 1});
  const dnnl::memory::desc c_md(dims{M, N}, dt::bf16, dims{ldc, 1});
  if (!bias) return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), engine);
  const dnnl::memory::desc bias_md(dims{1, N}, dt::f32, dims{N, 1});
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, bias_md, c_md), engine);
}

#endif

}  // namespace

bool host_gemm_writes_bf16() {
#if KFORMER_HAVE_DNNL
  // Asked once: whether oneDNN builds a small bf16-in, bf16-out matmul with a bias on this CPU.
  static const bool runs = [] {
    try {
      bf16_out_desc(dnnl_engine(), false, false, 2, 2, 2, 2, 2, true, 2);
      return true;
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented) throw;
      return false;
    }
  }();
  return runs && host_gemm_bf16_try_dnnl();
#else
  return false;
#endif
}

void host_gemm_bf16_out(bool trans_a, bool trans_b, int M, int N, int K, const bf16* a, int lda, const bf16* b,
                        int ldb, const float* bias, bf16* c, int ldc) {
  if (!host_gemm_writes_bf16())
    throw std::logic_error("host_gemm_bf16_out: oneDNN's bf16 matmul is not usable here (see host_gemm_writes_bf16)");
#if KFORMER_HAVE_DNNL
  dnnl::engine& engine = dnnl_engine();
  const auto pd = bf16_out_desc(engine, trans_a, trans_b, M, N, K, lda, ldb, bias != nullptr, ldc);
  dnnl::stream stream(engine);
  dnnl::memory am(pd.src_desc(), engine, const_cast<bf16*>(a)), bm(pd.weights_desc(), engine, const_cast<bf16*>(b)),
      cm(pd.dst_desc(), engine, c);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(pd.bias_desc(), engine, const_cast<float*>(bias)));
  dnnl::matmul(pd).execute(stream, args);
  stream.wait();
  g_bf16_library = "oneDNN matmul (bf16, bias and bf16 output in its epilogue)";
#else
  (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)a, (void)lda, (void)b, (void)ldb, (void)bias, (void)c,
      (void)ldc;
#endif
}

void host_gemm_bf16_rowmajor(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* a, int lda,
                             const bf16* b, int ldb, float beta, float* c, int ldc) {
#if KFORMER_HAVE_DNNL
  if (host_gemm_bf16_try_dnnl() && dnnl_gemm_bf16(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc)) {
    g_bf16_library = "oneDNN matmul (bf16)";
    return;
  }
#endif
#if KFORMER_HAVE_CBLAS
  // bf16 -> fp32 is exact, so sgemm gives the products and fp32 sums a bf16 GEMM would.
  const std::vector<float> wa = widen(a, trans_a ? K : M, trans_a ? M : K, lda);
  const std::vector<float> wb = widen(b, trans_b ? N : K, trans_b ? K : N, ldb);
  cblas_sgemm_rowmajor(trans_a, trans_b, M, N, K, alpha, wa.data(), lda, wb.data(), ldb, beta, c, ldc);
  g_bf16_library = "OpenBLAS sgemm on fp32 copies";
#else
  (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb,
      (void)beta, (void)c, (void)ldc, (void)widen;
  throw std::runtime_error(
      "kernels.gemm=vendor in bf16 needs oneDNN (libdnnl-dev, with AVX-512) or CBLAS on the host, and this "
      "kformer has neither usable: install libdnnl-dev or libopenblas-dev and reconfigure, or use kernels.gemm=native");
#endif
}

void host_gemm_strided(const StridedGemm& g) {
  // The stored (not transposed) shapes of C and, for the bf16 C, its fp32 copy.
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
