// GPT's MLP backward through its activation (FC1 -> GELU -> FC2): FC2's backward into the GELU's
// input, with the GELU's gradient and FC1's bias gradient in cuBLASLt's epilogue where it has one
// (the vendor GEMM under CUDA), else matmul_backward and gelu_backward as separate calls.
#pragma once

#include "activations.hpp"
#include "gemm.hpp"

namespace kformer::kernels {

// FC2's backward into the GELU's input (GPT's MLP: FC1 -> GELU -> FC2): FC2's weight and bias
// gradients as matmul_backward adds them (dw += dy^T act, db += column sums of dy), and
// d_pre(N, F) = (dy w) * gelu'(pre), overwritten. Unfused: matmul_backward's dx into the fp32 d_act
// (N, F), then gelu_backward; returns false. Where cuBLASLt has its dGELU + bias-gradient epilogue
// for the call (the vendor GEMM under CUDA, db_pre given), one GEMM writes d_pre and its column
// sums, which are added into db_pre (FC1's bias gradient, rounded to T first: the epilogue writes
// them in its output's type, as PyTorch's autocast and Megatron-LM keep a bf16 bias gradient), and
// d_act is not written; returns true: the caller's FC1 backward must then leave its bias out.
// T = float or bf16.
namespace detail {
template <class ExecSpace, class T>
bool matmul_backward_gelu_any(const ExecSpace& exec, GemmImpl impl, DView<T**, ExecSpace> d_pre,
                              DView<float*, ExecSpace> db_pre, DView<float**, ExecSpace> d_act,
                              DView<float**, ExecSpace> dw, DView<float*, ExecSpace> db, DView<const T**, ExecSpace> dy,
                              DView<const T**, ExecSpace> act, DView<const T**, ExecSpace> w,
                              DView<const T**, ExecSpace> pre) {
  bool fused = false;
  const int n = int(dy.extent(0)), out = int(dy.extent(1)), f = int(w.extent(1));
  const bool fits = impl == GemmImpl::vendor && int(db_pre.extent(0)) == f && int(w.extent(0)) == out &&
                    int(d_pre.extent(0)) == n && int(d_pre.extent(1)) == f && pre.extent(0) == d_pre.extent(0) &&
                    pre.extent(1) == d_pre.extent(1);
  if (fits && described_as_cuda()) {
    // The CUDA build's fused call, described: the input-gradient GEMM (FC2's dx product) writing d_pre
    // in T, reading the pre-activation beside it, and the bias gradient's small add after it.
    const Call call("matmul_backward_gelu", [&] {
      return gemm_call(holds_bf16<decltype(dy)>, true, n, out, f, 1, bytes_of(d_pre, dy, w, pre));
    });
    const Call add("bias_gradient_from_epilogue", [&] {
      KernelCall c;
      c.family = Family::copy, c.bytes = double(f) * (2 * sizeof(float) + sizeof(T)), c.shape = {f, 0, 0, 0, 0, 0};
      return c;
    });
    fused = true;
  }
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    if (fits && gemm_vendor_available<ExecSpace>() && !described()) {
      // The epilogue's column sums go to the GEMM workspace, released before matmul_backward below
      // takes it for FC2's bias gradient.
      auto workspace = GemmWorkspace<typename ExecSpace::memory_space>::get(std::size_t(f));
      T* const sums = reinterpret_cast<T*>(workspace.first);
      LtGemm g;
      g.M = n, g.N = f, g.K = out;
      g.ab = g.d = std::is_same<T, bf16>::value ? BlasType::bf16 : BlasType::f32;
      g.a = dy.data(), g.b = w.data(), g.lda = int(dy.stride_0()), g.ldb = int(w.stride_0());
      g.dp = d_pre.data(), g.ldd = int(d_pre.stride_0()), g.epilogue = LtEpilogue::dgelu_bgrad;
      g.aux = const_cast<T*>(pre.data()), g.ldaux = std::int64_t(pre.stride_0()), g.bias = sums;
      fused = cublaslt_gemm(exec, g);
      if (fused)
        Kokkos::parallel_for(
            "kformer::bias_gradient_from_epilogue", Kokkos::RangePolicy<ExecSpace>(exec, 0, f),
            KOKKOS_LAMBDA(const int j) { db_pre(j) += float(sums[j]); });
      release_workspace(exec);
    }
  }
#endif
  // FC2's weight and bias gradients, and where the epilogue did not run, its input gradient and the GELU's.
  matmul_backward_any<ExecSpace, T>(exec, impl, fused ? DView<float**, ExecSpace>() : d_act, dw, db, dy, act, w);
  if (!fused) gelu_backward(exec, d_pre, pre, d_act);
  return fused;
}
}  // namespace detail

template <class ExecSpace>
bool matmul_backward_gelu(const ExecSpace& exec, GemmImpl impl, DView<float**, ExecSpace> d_pre,
                          DView<float*, ExecSpace> db_pre, DView<float**, ExecSpace> d_act,
                          DView<float**, ExecSpace> dw, DView<float*, ExecSpace> db,
                          DView<const float**, ExecSpace> dy, DView<const float**, ExecSpace> act,
                          DView<const float**, ExecSpace> w, DView<const float**, ExecSpace> pre) {
  return detail::matmul_backward_gelu_any<ExecSpace, float>(exec, impl, d_pre, db_pre, d_act, dw, db, dy, act, w, pre);
}
template <class ExecSpace>
bool matmul_backward_gelu(const ExecSpace& exec, GemmImpl impl, DView<bf16**, ExecSpace> d_pre,
                          DView<float*, ExecSpace> db_pre, DView<float**, ExecSpace> d_act,
                          DView<float**, ExecSpace> dw, DView<float*, ExecSpace> db,
                          DView<const bf16**, ExecSpace> dy, DView<const bf16**, ExecSpace> act,
                          DView<const bf16**, ExecSpace> w, DView<const bf16**, ExecSpace> pre) {
  return detail::matmul_backward_gelu_any<ExecSpace, bf16>(exec, impl, d_pre, db_pre, d_act, dw, db, dy, act, w, pre);
}

}  // namespace kformer::kernels
