// Causal grouped-query attention with batched vendor GEMMs (kernels.attention=batched_gemm): the
// naive algorithm (scores (B,H,T,T) materialised, causal softmax, weighted sum of values), its
// four products as strided batches of GEMMs in the vendor library (cuBLAS on the execution
// space's stream, on the tensor cores in bf16; OpenBLAS on the host), as Megatron-LM runs
// attention without a flash kernel. On a GPU the products run over the full T*T scores, as
// Megatron-LM's do; on the host they run in blocks of query rows, each over the keys up to its
// last row (causal_block_rows). Either way the softmax reads only the causal half and writes
// zeros above the diagonal, so what the GEMMs leave there (or do not write) is never used.
// Layout of qkv (B,T,(H+2KV)*hd) and out (B,T,H*hd): see attention_common.hpp.
//
// One GEMM batch per (sequence b, position g of the query head in its group): over the KV groups
// kvh, query head h = kvh*G + g sits G*hd columns after the previous one and its kv head hd
// columns after, so both are constant strides (and G = 1, plain multi-head attention, is one
// batch of H per sequence).
//
// Element types: every T*T matrix in the probabilities' type, as Megatron-LM's baddbmm and fused
// softmax keep them. Under bf16 mixed precision the scores are the QK^T GEMM's bf16 output
// (rounded once from its fp32 sums) and the softmax turns them into bf16 probabilities in place;
// dP = dO V^T is written in bf16 and the softmax's backward turns it into bf16 d(scores) in
// place. The softmaxes compute in fp32, every GEMM sums in fp32, and a bf16 dqkv is summed in an
// fp32 buffer and rounded once. In fp32 all of it is fp32, the scores in the probabilities'
// buffer and dP in datt.
#pragma once

#include "attention_common.hpp"
#include "gemm.hpp"
#include "gemm_vendor.hpp"
#include "kept_buffer.hpp"
#include "softmax.hpp"

#include <string>
#include <type_traits>

namespace kformer::kernels {
namespace detail {

template <class T>
constexpr BlasType blas_type = std::is_same<std::remove_const_t<T>, bf16>::value ? BlasType::bf16 : BlasType::f32;

struct BatchedDScores {};  // kept-buffer tags: bf16 dP and d(scores), fp32 dqkv sums
struct BatchedGradSums {};

// Throws, naming the fix, where this build has no vendor BLAS for ExecSpace.
template <class ExecSpace>
void require_batched_gemm() {
  if (!gemm_vendor_available<ExecSpace>())
    throw std::runtime_error(std::string("kernels.attention=batched_gemm needs a vendor BLAS (OpenBLAS on the host, "
                                         "cuBLAS under CUDA) and this build has none for ") +
                             ExecSpace::name() +
                             ": reconfigure with -DKFORMER_ENABLE_BLAS=ON, or use kernels.attention=fused");
}

// g on exec: cuBLAS on its stream, or the host BLAS once exec's earlier kernels are done.
template <class ExecSpace>
void run_strided(const ExecSpace& exec, const StridedGemm& g) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    cublas_gemm_strided(exec, g);
    return;
  }
#endif
  if constexpr (runs_on_host<ExecSpace>) {
    exec.fence();
    host_gemm_strided(g);
  } else {
    require_batched_gemm<ExecSpace>();
  }
}

// One batch over the KV groups: C_kvh = alpha op(A_kvh) op(B_kvh) + beta C_kvh, with A, B, C the
// first group's matrices and each group's sa, sb, sc elements after the previous one's.
struct HeadBatch {
  bool ta, tb;
  int M, N, K;
  float alpha, beta;
};
template <class ExecSpace, class TA, class TB, class TC>
void head_batch(const ExecSpace& exec, const HeadBatch& h, const TA* a, int lda, long long sa, const TB* b, int ldb,
                long long sb, TC* c, int ldc, long long sc, int count) {
  static_assert(std::is_same<std::remove_const_t<TA>, std::remove_const_t<TB>>::value,
                "batched attention: the operands of a product must share their element type");
  StridedGemm g;
  g.trans_a = h.ta, g.trans_b = h.tb, g.M = h.M, g.N = h.N, g.K = h.K, g.alpha = h.alpha, g.beta = h.beta;
  g.ab = blas_type<TA>, g.c = blas_type<TC>;
  g.a = a, g.b = b, g.cp = c, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
  g.stride_a = sa, g.stride_b = sb, g.stride_c = sc, g.count = count;
  run_strided(exec, g);
}

template <class V>
void require_contiguous(const V& v, const char* what) {
  if (!v.span_is_contiguous())
    throw std::invalid_argument(std::string("batched attention: ") + what + " must be contiguous (LayoutRight)");
}

// Query rows a product takes at a time on the host (0: all T). A block of rows [r0, r0 + R) needs
// the keys [0, r0 + R) only, the rest of its scores being above the diagonal, so the blocked
// products skip that work (3/8 of it at T 1024 in blocks of 256, 7/16 at T 2048). On a GPU the
// products stay whole: there each is a few microseconds, and more, smaller calls cost more in
// launches than the work they skip. Tests set it small to run many blocks and a partial one.
inline int& causal_block_rows() {
  static int rows = 256;
  return rows;
}
// f(r0, nr, nk) for each block of rows [r0, r0 + nr) of T, nk = r0 + nr the keys it attends to:
// blocks of causal_block_rows() on the host, one block of all T on a GPU.
template <class ExecSpace, class F>
void for_causal_blocks(int T, const F& f) {
  const int r = causal_block_rows();
  const int R = runs_on_host<ExecSpace> && r > 0 && r < T ? r : T;
  for (int r0 = 0; r0 < T; r0 += R) {
    const int nr = T - r0 < R ? T - r0 : R;
    f(r0, nr, r0 + nr);
  }
}
}  // namespace detail

// out (nb,T,H*hd) and att (nb,H,T,T) (the probabilities, float or bf16) from qkv (nb,T,W): the
// scores go into att, in its type, and the softmax runs in place.
template <class ExecSpace, class OutView, class AttView, class QkvView>
void attention_batched_forward(const ExecSpace& exec, const OutView& out, const AttView& att, const QkvView& qkv,
                               int n_heads, int n_kv_heads) {
  detail::require_batched_gemm<ExecSpace>();
  using TP = elem_t<AttView>;
  const detail::QkvLayout L = detail::make_qkv_layout(qkv.extent(2), n_heads, n_kv_heads);
  detail::require_contiguous(qkv, "qkv"), detail::require_contiguous(out, "out");
  detail::require_contiguous(att, "att");
  const int nb = static_cast<int>(qkv.extent(0)), T = static_cast<int>(qkv.extent(1));
  const int H = L.H, KV = L.KV, G = H / KV, hd = L.hd, W = static_cast<int>(qkv.extent(2)), Wo = H * hd;
  const long long TT = (long long)T * T;
  TP* S = att.data();
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  for (int b = 0; b < nb; ++b)
    for (int g = 0; g < G; ++g)  // S_h = scale Q_h K_kvh^T, query rows [r0, r0 + nr) against keys [0, nk)
      detail::for_causal_blocks<ExecSpace>(T, [&](int r0, int nr, int nk) {
        const auto* q = qkv.data() + (long long)b * T * W;
        detail::head_batch(exec, {false, true, nr, nk, hd, scale, 0.f}, q + (long long)r0 * W + L.q_col(g), W, G * hd,
                           q + L.k_col(0), W, hd, S + (b * H + g) * TT + (long long)r0 * T, T, G * TT, KV);
      });
  causal_softmax_forward(exec, att, DView<const TP****, ExecSpace>(att));
  for (int b = 0; b < nb; ++b)
    for (int g = 0; g < G; ++g)  // out_h = P_h V_kvh
      detail::for_causal_blocks<ExecSpace>(T, [&](int r0, int nr, int nk) {
        const TP* p = att.data() + (b * H + g) * TT + (long long)r0 * T;
        detail::head_batch(exec, {false, false, nr, hd, nk, 1.f, 0.f}, p, T, G * TT,
                           qkv.data() + (long long)b * T * W + L.v_col(0), W, hd,
                           out.data() + ((long long)b * T + r0) * Wo + g * hd, Wo, G * hd, KV);
      });
}

// dqkv (nb,T,W) from dout (nb,T,H*hd), the forward's qkv and att (nb,H,T,T); datt (nb,H,T,T)
// is fp32 probabilities' scratch (bf16 ones use a kept bf16 buffer). dk and dv sum over the query
// heads of their group, g in order.
template <class ExecSpace, class DqkvView, class DoutView, class QkvView, class AttView>
void attention_batched_backward(const ExecSpace& exec, const DqkvView& dqkv, const DView<float****, ExecSpace>& datt,
                                const DoutView& dout, const QkvView& qkv, const AttView& att, int n_heads,
                                int n_kv_heads) {
  detail::require_batched_gemm<ExecSpace>();
  using TD = elem_t<DqkvView>;
  using TP = elem_t<AttView>;
  using Mem = typename ExecSpace::memory_space;
  const detail::QkvLayout L = detail::make_qkv_layout(qkv.extent(2), n_heads, n_kv_heads);
  detail::require_contiguous(dqkv, "dqkv"), detail::require_contiguous(dout, "dout");
  detail::require_contiguous(qkv, "qkv"), detail::require_contiguous(att, "att");
  const int nb = static_cast<int>(qkv.extent(0)), T = static_cast<int>(qkv.extent(1));
  const int H = L.H, KV = L.KV, G = H / KV, hd = L.hd, W = static_cast<int>(qkv.extent(2)), Wo = H * hd;
  const long long TT = (long long)T * T, TW = (long long)T * W;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  // dP, then d(scores) in place over it, in the probabilities' element type: datt itself (fp32),
  // else a kept bf16 buffer.
  using DsView = Kokkos::View<TP****, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  DsView ds;
  if constexpr (std::is_same<TP, float>::value) {
    ds = DsView(datt.data(), nb, H, T, T);
  } else {
    const auto kept = detail::kept_buffer<detail::BatchedDScores, TP, Mem>(std::size_t(nb) * H * TT,
                                                                           "kformer::attention_batched_ds");
    ds = DsView(kept.data(), nb, H, T, T);
  }
  for (int b = 0; b < nb; ++b)
    for (int g = 0; g < G; ++g)  // dP_h = dO_h V_kvh^T, the causal blocks as in the forward
      detail::for_causal_blocks<ExecSpace>(T, [&](int r0, int nr, int nk) {
        detail::head_batch(exec, {false, true, nr, nk, hd, 1.f, 0.f},
                           dout.data() + ((long long)b * T + r0) * Wo + g * hd, Wo, G * hd,
                           qkv.data() + b * TW + L.v_col(0), W, hd, ds.data() + (b * H + g) * TT + (long long)r0 * T,
                           T, G * TT, KV);
      });
  causal_softmax_backward(exec, ds, DView<const TP****, ExecSpace>(ds), att);
  // The sums: in dqkv itself when it is fp32, else in a kept fp32 buffer rounded into it at the end.
  float* gs = nullptr;
  Kokkos::View<float*, Mem> sums;
  if constexpr (std::is_same<TD, float>::value) {
    gs = dqkv.data();
  } else {
    sums = detail::kept_buffer<detail::BatchedGradSums, float, Mem>(std::size_t(nb) * TW,
                                                                   "kformer::attention_batched_sums");
    gs = sums.data();
  }
  for (int b = 0; b < nb; ++b) {
    const auto* q = qkv.data() + b * TW;
    const auto* dO = dout.data() + (long long)b * T * Wo;
    float* gb = gs + b * TW;
    for (int g = 0; g < G; ++g) {
      const TP* dsh = ds.data() + (b * H + g) * TT;
      const TP* ph = att.data() + (b * H + g) * TT;
      const float acc = g == 0 ? 0.f : 1.f;
      detail::for_causal_blocks<ExecSpace>(T, [&](int r0, int nr, int nk) {
        const long long d = (long long)r0 * T + r0;  // dS_h and P_h from row r0, column r0
        // dQ_h = scale dS_h K_kvh over query rows [r0, r0 + nr) and keys [0, nk)
        detail::head_batch(exec, {false, false, nr, hd, nk, scale, 0.f}, dsh + (long long)r0 * T, T, G * TT,
                           q + L.k_col(0), W, hd, gb + (long long)r0 * W + L.q_col(g), W, G * hd, KV);
        // dK_kvh += scale dS_h^T Q_h and dV_kvh += P_h^T dO_h over keys [r0, r0 + nr) and query
        // rows [r0, T), the only ones that attend to them
        detail::head_batch(exec, {true, false, nr, hd, T - r0, scale, acc}, dsh + d, T, G * TT,
                           q + (long long)r0 * W + L.q_col(g), W, G * hd, gb + (long long)r0 * W + L.k_col(0), W, hd,
                           KV);
        detail::head_batch(exec, {true, false, nr, hd, T - r0, 1.f, acc}, ph + d, T, G * TT,
                           dO + (long long)r0 * Wo + g * hd, Wo, G * hd, gb + (long long)r0 * W + L.v_col(0), W, hd,
                           KV);
      });
    }
  }
  if constexpr (!std::is_same<TD, float>::value) {
    TD* d = dqkv.data();
    Kokkos::parallel_for(
        "kformer::attention_batched_round", Kokkos::RangePolicy<ExecSpace>(exec, 0, nb * TW),
        KOKKOS_LAMBDA(const long long i) { d[i] = TD(gs[i]); });
  }
}

}  // namespace kformer::kernels
