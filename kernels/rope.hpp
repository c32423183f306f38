// Rotary position embedding (llama), forward and backward, in the Llama / Hugging Face
// "rotate_half" convention: within each head of width hd, dims i and i + hd/2 form a pair,
// rotated by angle pos * theta^(-2i/hd), pos = pos_offset + t (an offset so that a sequence
// split over pipeline micro-steps or context slices keeps its absolute positions).
//
// Works on any (B,T,W) buffer of heads side by side: the first n_rot_heads heads are rotated
// and the remaining columns copied, so a packed QKV buffer [q heads | k heads | v heads] is
// handled in one call with n_rot_heads = H + KV. Angles are computed in double: at positions of
// a few thousand a float angle is off by ~1e-4 rad. out may alias inp.
#pragma once

#include "kokkos_compat.hpp"
#include "view_types.hpp"

namespace kformer::kernels {

namespace detail {
// sign = +1 rotates by +angle (forward), -1 by -angle (the transpose: backward).
template <class ExecSpace>
void rope_apply(const ExecSpace& exec, const DView<float***, ExecSpace>& out,
                const DView<const float***, ExecSpace>& inp, int n_rot_heads, int head_dim, int pos_offset,
                double theta, double sign) {
  const int B = static_cast<int>(inp.extent(0)), T = static_cast<int>(inp.extent(1));
  const int W = static_cast<int>(inp.extent(2)), half = head_dim / 2;
  Kokkos::parallel_for(
      "kformer::rope", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(exec, {0, 0}, {int64_t(B) * T, int64_t(half)}),
      KOKKOS_LAMBDA(const int64_t bt, const int64_t i) {
        const int b = static_cast<int>(bt / T), t = static_cast<int>(bt % T);
        const double inv_freq = kmath::pow(theta, -2.0 * static_cast<double>(i) / head_dim);
        const double angle = static_cast<double>(pos_offset + t) * inv_freq;
        const float c = static_cast<float>(kmath::cos(angle));
        const float s = static_cast<float>(sign * kmath::sin(angle));
        for (int h = 0; h < n_rot_heads; ++h) {
          const int j = h * head_dim + static_cast<int>(i);
          const float x1 = inp(b, t, j), x2 = inp(b, t, j + half);
          out(b, t, j) = x1 * c - x2 * s;
          out(b, t, j + half) = x2 * c + x1 * s;
        }
      });
  const int rest = n_rot_heads * head_dim;
  if (rest < W && out.data() != inp.data()) {
    Kokkos::parallel_for(
        "kformer::rope_copy",
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(exec, {0, 0}, {int64_t(B) * T, int64_t(W - rest)}),
        KOKKOS_LAMBDA(const int64_t bt, const int64_t c) {
          const int b = static_cast<int>(bt / T), t = static_cast<int>(bt % T);
          out(b, t, rest + c) = inp(b, t, rest + c);
        });
  }
}
}  // namespace detail

// out (B,T,W) = inp with the first n_rot_heads heads (width head_dim, even) rotated.
template <class ExecSpace>
void rope_forward(const ExecSpace& exec, const DView<float***, ExecSpace>& out,
                  const DView<const float***, ExecSpace>& inp, int n_rot_heads, int head_dim, int pos_offset,
                  double theta = 10000.0) {
  detail::rope_apply(exec, out, inp, n_rot_heads, head_dim, pos_offset, theta, 1.0);
}

// dinp (B,T,W) = the inverse rotation of dout (rotations are orthogonal).
template <class ExecSpace>
void rope_backward(const ExecSpace& exec, const DView<float***, ExecSpace>& dinp,
                   const DView<const float***, ExecSpace>& dout, int n_rot_heads, int head_dim, int pos_offset,
                   double theta = 10000.0) {
  detail::rope_apply(exec, dinp, dout, n_rot_heads, head_dim, pos_offset, theta, -1.0);
}

}  // namespace kformer::kernels
