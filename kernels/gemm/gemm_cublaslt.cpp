// cuBLASLt's fused epilogues behind the vendor GEMM under CUDA (gemm_vendor.hpp, LtGemm): the
// bias, or the bias and GELU with the pre-activation kept as the auxiliary output, added in the
// GEMM's own epilogue instead of passes over C after it; in the backward, the GELU's gradient and
// the column sums that are the bias gradient. One plan per shape, types, epilogue and
// operand alignment: the descriptors and the algorithm cuBLASLt's heuristic returns, or the fact
// that it returned none (the caller then runs the GEMM and its passes as before).
#include "gemm_vendor.hpp"

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#if defined(KOKKOS_ENABLE_CUDA) && KFORMER_HAVE_CUBLAS
#include <cublasLt.h>
#include <cuda_runtime.h>
#endif

namespace kformer::kernels::detail {

#if defined(KOKKOS_ENABLE_CUDA)
#if KFORMER_HAVE_CUBLAS
namespace {

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt: ") + what + " failed with status " +
                             std::to_string(static_cast<int>(st)));
}

// One handle and one workspace per process, never destroyed (as the cuBLAS handle: a static
// destructor would run after the CUDA runtime has shut down). Every kformer GEMM is on one
// stream, so one workspace serves them in turn.
cublasLtHandle_t lt_handle() {
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t x = nullptr;
    check(cublasLtCreate(&x), "cublasLtCreate");
    return x;
  }();
  return h;
}
constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;
void* lt_workspace() {
  static void* w = [] {
    void* p = nullptr;
    if (cudaMalloc(&p, kWorkspaceBytes) != cudaSuccess) throw std::runtime_error("cuBLASLt: no memory for its workspace");
    return p;
  }();
  return w;
}

// The largest power of two up to 256 that divides the address: what the heuristic may assume.
std::uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al /= 2;
  return al;
}

cudaDataType cuda_type(BlasType t) { return t == BlasType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

struct Plan {
  bool ok = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

using Key = std::tuple<bool, bool, int, int, int, int, int, int, int, int, int, std::int64_t, std::uint32_t,
                       std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t>;

Key key_of(const LtGemm& g) {
  return Key{g.trans_a, g.trans_b, g.M, g.N, g.K, int(g.ab), int(g.d), int(g.epilogue), g.lda, g.ldb, g.ldd,
             g.ldaux, alignment(g.a), alignment(g.b), alignment(g.dp), alignment(g.bias), alignment(g.aux)};
}

// Row-major C(M,N) = op(A) op(B) is column-major C^T(N,M) = op(B)^T op(A)^T (as the cuBLAS
// calls): cuBLASLt's A is kformer's B and its B is kformer's A, each keeping its transposition.
// Its rows (N) are kformer's columns, so its bias, one per row, is one per column here.
Plan make_plan(const LtGemm& g) {
  Plan p;
  const cudaDataType ab = cuda_type(g.ab), d = cuda_type(g.d);
  check(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t opa = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)), "set TRANSA");
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)), "set TRANSB");
  const cublasLtEpilogue_t epi = g.epilogue == LtEpilogue::bias            ? CUBLASLT_EPILOGUE_BIAS
                                 : g.epilogue == LtEpilogue::gelu_aux_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                                           : CUBLASLT_EPILOGUE_DGELU_BGRAD;
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "set EPILOGUE");
  // kformer's biases are fp32 in every precision; the bias gradient comes in D's type.
  const std::int32_t bias_type = g.epilogue == LtEpilogue::dgelu_bgrad ? std::int32_t(d) : std::int32_t(CUDA_R_32F);
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)),
        "set BIAS_DATA_TYPE");
  // The pointers go in before the heuristic, which reads their alignment (set again per call).
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)), "set BIAS");
  if (g.epilogue != LtEpilogue::bias) {
    check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux, sizeof(g.aux)),
          "set AUX_POINTER");
    check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &g.ldaux, sizeof(g.ldaux)),
          "set AUX_LD");
  }
  check(cublasLtMatrixLayoutCreate(&p.la, ab, g.trans_b ? g.K : g.N, g.trans_b ? g.N : g.K, g.ldb), "layout A");
  check(cublasLtMatrixLayoutCreate(&p.lb, ab, g.trans_a ? g.M : g.K, g.trans_a ? g.K : g.M, g.lda), "layout B");
  check(cublasLtMatrixLayoutCreate(&p.ld, d, g.N, g.M, g.ldd), "layout D");

  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const std::size_t ws = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  const std::uint32_t al[] = {alignment(g.b), alignment(g.a), alignment(g.dp), alignment(g.dp)};
  const cublasLtMatmulPreferenceAttributes_t which[] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof(al[i]));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt_handle(), p.op, p.la, p.lb, p.ld, p.ld, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  p.ok = st == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS;
  if (p.ok) p.algo = res.algo;
  return p;
}

Plan& plan_for(const LtGemm& g) {
  static std::map<Key, Plan> plans;  // one GEMM stream, one thread: no lock
  const Key k = key_of(g);
  auto it = plans.find(k);
  if (it == plans.end()) it = plans.emplace(k, make_plan(g)).first;
  return it->second;
}

// What cuBLASLt's GELU epilogues require of the auxiliary matrix's leading dimension.
bool aux_ld_ok(const LtGemm& g) {
  return g.epilogue == LtEpilogue::bias || (g.aux != nullptr && g.ldaux % 8 == 0 && g.ldaux >= g.N);
}

}  // namespace

bool& cublaslt_epilogues_on() {
  static bool on = true;
  return on;
}

bool cublaslt_supports(const LtGemm& g) {
  if (!cublaslt_epilogues_on() || g.M == 0 || g.N == 0 || g.K == 0 || g.bias == nullptr || !aux_ld_ok(g)) return false;
  return plan_for(g).ok;
}

bool cublaslt_gemm(const Kokkos::Cuda& exec, const LtGemm& g) {
  if (!cublaslt_supports(g)) return false;
  Plan& p = plan_for(g);
  check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)), "set BIAS");
  if (g.epilogue != LtEpilogue::bias)
    check(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux, sizeof(g.aux)),
          "set AUX_POINTER");
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(lt_handle(), p.op, &alpha, g.b, p.la, g.a, p.lb, &beta, g.dp, p.ld, g.dp,
                                          p.ld, &p.algo, lt_workspace(), kWorkspaceBytes, exec.cuda_stream());
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {  // the heuristic's algorithm refused at launch: never again
    p.ok = false;
    return false;
  }
  check(st, "cublasLtMatmul");
  return true;
}
#else
bool& cublaslt_epilogues_on() {
  static bool on = false;  // no cuBLAS in this build
  return on;
}
bool cublaslt_supports(const LtGemm&) { return false; }
bool cublaslt_gemm(const Kokkos::Cuda&, const LtGemm&) { return false; }
#endif
#endif

}  // namespace kformer::kernels::detail
