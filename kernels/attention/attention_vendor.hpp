// The vendor attention behind `kernels.attention=vendor`: cuDNN's flash attention (SDPA forward and
// backward of cuDNN 9's graph API), on bf16 activations under CUDA, in builds with cuDNN
// (KFORMER_HAVE_CUDNN). Non-template entry points, compiled once in attention_cudnn.cpp, so that
// no caller includes cudnn_frontend.h (about 80 s of nvcc per file); the adapters below check the
// views and hand their pointers over. Like the fused kernel it keeps the row logsumexp of the
// scaled scores (B,H,T) from forward to backward, cuDNN's "stats".
//
// cuDNN reads the packed layout of attention_common.hpp as it is: Q, K and V are strided views
// into qkv and the gradients go straight into dqkv, so nothing is transposed or copied.
#pragma once

#include <Kokkos_Core.hpp>

#include "attention_common.hpp"
#include "bf16.hpp"
#include "kformer_config.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

namespace kformer::kernels {

// Whether kernels.attention=vendor runs on ExecSpace in this build (as gemm_vendor_available
// says for the GEMM): only Kokkos::Cuda with cuDNN, and then only for bf16 activations.
template <class ExecSpace>
constexpr bool attention_vendor_available() {
#if defined(KOKKOS_ENABLE_CUDA)
  return std::is_same<ExecSpace, Kokkos::Cuda>::value && KFORMER_HAVE_CUDNN != 0;
#else
  return false;
#endif
}

namespace detail {

// The shape of one causal GQA attention call: batch, sequence, query heads, kv heads, head size.
struct SdpaShape {
  int B, T, H, KV, hd;
};

#if defined(KOKKOS_ENABLE_CUDA)
// Whether cuDNN opens here at run time (libcudnn.so.9 on the library path); `why` gets the reason
// when not. Always false in a build without cuDNN.
bool cudnn_attention_loads(std::string* why = nullptr);
// out (B,T,H*hd) and lse (B,H,T) from qkv (B,T,(H+2KV)*hd), all contiguous row-major, on exec's
// stream (asynchronous, like a Kokkos kernel). Throws std::runtime_error naming the shape and
// cuDNN's message when cuDNN cannot run it, or naming the fix when this build has no cuDNN.
void cudnn_attention_forward(const Kokkos::Cuda& exec, const SdpaShape& s, const bf16* qkv, bf16* out, float* lse);
// dqkv (B,T,(H+2KV)*hd) from dout (B,T,H*hd) and the forward's qkv, out and lse; every element of
// dqkv is written.
void cudnn_attention_backward(const Kokkos::Cuda& exec, const SdpaShape& s, const bf16* qkv, const bf16* out,
                              const bf16* dout, const float* lse, bf16* dqkv);
#endif

template <class ExecSpace>
constexpr bool is_cuda_space() {
#if defined(KOKKOS_ENABLE_CUDA)
  return std::is_same<ExecSpace, Kokkos::Cuda>::value;
#else
  return false;
#endif
}

// Whether the vendor kernel takes these views at all (the rest is checked at run time).
template <class ExecSpace, class... Views>
constexpr bool vendor_attention_takes() {
  return is_cuda_space<ExecSpace>() &&
         (std::is_same<std::remove_const_t<typename Views::value_type>, bf16>::value && ...);
}

template <class ExecSpace, class QkvView>
[[noreturn]] void vendor_attention_refused() {
  const bool bf16_io = std::is_same<std::remove_const_t<typename QkvView::value_type>, bf16>::value;
  throw std::invalid_argument(std::string("kernels.attention=vendor runs bf16 activations under CUDA with cuDNN: ") +
                              "this run has " + (bf16_io ? "bf16" : "fp32") + " activations on " + ExecSpace::name() +
                              "; use train.precision=bf16 on a CUDA build, or kernels.attention=auto");
}

// The shape of qkv, checked against out and lse; cuDNN gets raw pointers, so every view must be
// contiguous (a LayoutRight view with its natural strides).
template <class QkvView, class OutView, class LseView>
SdpaShape vendor_attention_shape(const QkvView& qkv, const OutView& out, const LseView& lse, int n_heads,
                                 int n_kv_heads) {
  const QkvLayout l = make_qkv_layout(qkv.extent(2), n_heads, n_kv_heads);
  const SdpaShape s{static_cast<int>(qkv.extent(0)), static_cast<int>(qkv.extent(1)), l.H, l.KV, l.hd};
  const bool fits = out.extent(0) == qkv.extent(0) && out.extent(1) == qkv.extent(1) &&
                    out.extent(2) == std::size_t(s.H) * std::size_t(s.hd) && lse.extent(0) == qkv.extent(0) &&
                    lse.extent(1) == std::size_t(s.H) && lse.extent(2) == qkv.extent(1);
  if (!fits)
    throw std::invalid_argument("attention (vendor): out must be (B,T,H*hd) and lse (B,H,T) for qkv (" +
                                std::to_string(s.B) + "," + std::to_string(s.T) + "," +
                                std::to_string(qkv.extent(2)) + ") with H=" + std::to_string(s.H));
  if (!qkv.span_is_contiguous() || !out.span_is_contiguous() || !lse.span_is_contiguous())
    throw std::invalid_argument("attention (vendor): qkv, out and lse must be contiguous views");
  return s;
}

}  // namespace detail

// cuDNN's forward: out and lse from qkv. Throws std::invalid_argument (one line) where the vendor
// kernel does not run: a host backend, or fp32 activations.
template <class ExecSpace, class OutView, class LseView, class QkvView>
void attention_vendor_forward(const ExecSpace& exec, const OutView& out, const LseView& lse, const QkvView& qkv,
                              int n_heads, int n_kv_heads) {
  if constexpr (detail::vendor_attention_takes<ExecSpace, QkvView, OutView>()) {
#if defined(KOKKOS_ENABLE_CUDA)
    const detail::SdpaShape s = detail::vendor_attention_shape(qkv, out, lse, n_heads, n_kv_heads);
    detail::cudnn_attention_forward(exec, s, qkv.data(), out.data(), lse.data());
#endif
  } else {
    (void)exec, (void)out, (void)lse, (void)qkv, (void)n_heads, (void)n_kv_heads;
    detail::vendor_attention_refused<ExecSpace, QkvView>();
  }
}

// cuDNN's backward: dqkv from dout and the forward's qkv, out and lse.
template <class ExecSpace, class DqkvView, class DoutView, class QkvView, class OutView, class LseView>
void attention_vendor_backward(const ExecSpace& exec, const DqkvView& dqkv, const DoutView& dout, const QkvView& qkv,
                               const OutView& out, const LseView& lse, int n_heads, int n_kv_heads) {
  if constexpr (detail::vendor_attention_takes<ExecSpace, QkvView, OutView, DqkvView, DoutView>()) {
#if defined(KOKKOS_ENABLE_CUDA)
    const detail::SdpaShape s = detail::vendor_attention_shape(qkv, out, lse, n_heads, n_kv_heads);
    const bool fits = dqkv.extent(0) == qkv.extent(0) && dqkv.extent(1) == qkv.extent(1) &&
                      dqkv.extent(2) == qkv.extent(2) && dout.extent(0) == out.extent(0) &&
                      dout.extent(1) == out.extent(1) && dout.extent(2) == out.extent(2);
    if (!fits) throw std::invalid_argument("attention (vendor): dqkv must be shaped as qkv and dout as out");
    if (!dqkv.span_is_contiguous() || !dout.span_is_contiguous())
      throw std::invalid_argument("attention (vendor): dqkv and dout must be contiguous views");
    detail::cudnn_attention_backward(exec, s, qkv.data(), out.data(), dout.data(), lse.data(), dqkv.data());
#endif
  } else {
    (void)exec, (void)dqkv, (void)dout, (void)qkv, (void)out, (void)lse, (void)n_heads, (void)n_kv_heads;
    detail::vendor_attention_refused<ExecSpace, QkvView>();
  }
}

}  // namespace kformer::kernels
