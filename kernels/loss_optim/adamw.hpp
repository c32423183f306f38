// AdamW (Loshchilov & Hutter; the update of torch.optim.AdamW): bias-corrected moments and
// decoupled weight decay, on a contiguous range of parameters (a flat RangePolicy: consecutive
// threads update consecutive elements). The gradient norm it is clipped by is sum_of_squares.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "call_record.hpp"
#include "kokkos_compat.hpp"
#include "view_types.hpp"

namespace kformer::kernels {

struct AdamWHyper {
  float lr = 3e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.f;
  int step = 1;            // 1-based, for the bias corrections
  float grad_scale = 1.f;  // applied to g first (the clipping factor)
};

namespace detail {
// One step's constants and the update of one element, shared by adamw_update and AdamWSegments
// (adamw_segments.hpp), so the two give the same bits.
struct AdamWStep {
  float step_size, sqrt_bc2, decay, b1, b2, eps, gs;
  explicit AdamWStep(const AdamWHyper& h) {
    const double bc1 = 1.0 - kmath::pow(double(h.beta1), double(h.step));
    const double bc2 = 1.0 - kmath::pow(double(h.beta2), double(h.step));
    step_size = static_cast<float>(h.lr / bc1), sqrt_bc2 = static_cast<float>(kmath::sqrt(bc2));
    decay = 1.f - h.lr * h.weight_decay, b1 = h.beta1, b2 = h.beta2, eps = h.eps, gs = h.grad_scale;
  }
  // decay_factor: `decay`, or 1 for a tensor without weight decay.
  template <class G>
  KOKKOS_INLINE_FUNCTION void update(float& p, const G& g, float& m, float& v, float decay_factor) const {
    const float gi = float(g) * gs;
    const float mi = b1 * m + (1.f - b1) * gi;
    const float vi = b2 * v + (1.f - b2) * gi * gi;
    m = mi;
    v = vi;
    p = decayed(p, decay_factor) - step_size * mi / (kmath::sqrt(vi) / sqrt_bc2 + eps);
  }
  // p * decay_factor rounded on its own. On a GPU ptxas may fuse a plain product with the
  // subtraction after it into one FMA, in one kernel and not in another: seen on an H200, where
  // AdamWSegments and adamw_update differed in about a third of the decayed values' last bits.
  KOKKOS_INLINE_FUNCTION static float decayed(float p, float decay_factor) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(p, decay_factor);
#else
    return p * decay_factor;
#endif
  }
};
}  // namespace detail

// p, m, v (n) updated in place from g (n):
//   p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// G: the gradient's element type, float or bf16 (a bf16 gradient buffer: parallel.grad_reduce_dtype),
// named by the caller (adamw_update<Exec, bf16>): not deduced, so that any float view converts.
template <class ExecSpace, class G = float>
void adamw_update(const ExecSpace& exec, const DView<float*, ExecSpace>& p,
                  const DView<const std::enable_if_t<true, G>*, ExecSpace>& g,
                  const DView<float*, ExecSpace>& m, const DView<float*, ExecSpace>& v, const AdamWHyper& h) {
  // Bytes: p, m and v read and written, g read (calibrate divides its measured time by the same).
  const Call call("adamw_update", [&] { return KernelCall{Family::optimizer, false, false, 2 * bytes_of(p, m, v) + bytes_of(g)}; });
  if (call.described()) return;
  const detail::AdamWStep c(h);
  // Work items are runs of W consecutive elements on the host (read through restrict pointers, so
  // the loop vectorises; the build's -fno-math-errno lets it vectorise the sqrt) and single
  // elements on a GPU, where consecutive threads take consecutive elements.
  constexpr std::int64_t W = runs_on_host<ExecSpace> ? 512 : 1;
  const std::int64_t n = static_cast<std::int64_t>(p.extent(0)), nchunk = (n + W - 1) / W;
  float* const pp = p.data();
  const G* const gp = g.data();
  float* const mp = m.data();
  float* const vp = v.data();
  Kokkos::parallel_for(
      "kformer::adamw_update", Kokkos::RangePolicy<ExecSpace>(exec, 0, nchunk), KOKKOS_LAMBDA(const std::int64_t k) {
        const std::int64_t i0 = k * W, i1 = i0 + W < n ? i0 + W : n;
        float* KOKKOS_RESTRICT pr = pp;
        const G* KOKKOS_RESTRICT gr = gp;
        float* KOKKOS_RESTRICT mr = mp;
        float* KOKKOS_RESTRICT vr = vp;
        for (std::int64_t i = i0; i < i1; ++i) c.update(pr[i], gr[i], mr[i], vr[i], c.decay);
      });
}

}  // namespace kformer::kernels
