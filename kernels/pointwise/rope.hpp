// Rotary position embedding (llama), forward and backward, in the Llama / Hugging Face
// "rotate_half" convention: within each head of width hd, dims i and i + hd/2 form a pair,
// rotated by angle pos * theta^(-2i/hd), pos = pos_offset + t (an offset so that a sequence
// split over pipeline micro-steps or context slices keeps its absolute positions).
//
// Works on any (B,T,W) buffer of heads side by side: the first n_rot_heads heads are rotated
// and the remaining columns copied, so a packed QKV buffer [q heads | k heads | v heads] is
// handled in one call with n_rot_heads = H + KV. Angles are computed in double (at positions of
// a few thousand a float angle is off by ~1e-4 rad), once, into a table kept between calls
// (rope_table.hpp). out may alias inp (when both have the same element type); out and inp are
// float or bf16 each, the rotation is fp32. S, the work shape (work_shape.hpp): a token row per
// work item on the host (vectorised over the dims), a (token, pair) per thread on a GPU.
#pragma once

#include "call_record.hpp"

#include "convert.hpp"
#include "kokkos_compat.hpp"
#include "rope_table.hpp"
#include "view_types.hpp"
#include "work_shape.hpp"

namespace kformer::kernels {

namespace detail {
// sign = +1 rotates by +angle (forward), -1 by -angle (the transpose: backward).
template <Shape S, class ExecSpace, class OutView, class InView>
void rope_apply(const ExecSpace& exec, const OutView& out, const InView& inp, int n_rot_heads, int head_dim,
                int pos_offset, double theta, float sign) {
  using TO = elem_t<OutView>;
  using TI = elem_t<InView>;
  const int B = static_cast<int>(inp.extent(0)), T = static_cast<int>(inp.extent(1));
  const int W = static_cast<int>(inp.extent(2)), half = head_dim / 2, rest = n_rot_heads * head_dim;
  if (B == 0 || T == 0) return;
  const auto tab = rope_table(exec, pos_offset + T, head_dim, theta);
  const bool copy_rest = rest < W && static_cast<const void*>(out.data()) != static_cast<const void*>(inp.data());
  if constexpr (shape_for<S, ExecSpace> == Shape::host) {
    // One token row per work item: every loop runs over contiguous dims and vectorises.
    Kokkos::parallel_for(
        "kformer::rope", Kokkos::RangePolicy<ExecSpace>(exec, 0, int64_t(B) * T), KOKKOS_LAMBDA(const int64_t bt) {
          const int b = static_cast<int>(bt / T), t = static_cast<int>(bt % T);
          const float* cs = &tab(pos_offset + t, 0, 0);  // cos of the half pairs, then their sin
          const TI* x = &inp(b, t, 0);
          TO* y = &out(b, t, 0);
          // y may be x (in place): each block of L pairs is loaded into locals before any store,
          // which keeps the loops vectorisable without a restrict promise that would be false.
          constexpr int L = 16;
          for (int h = 0; h < n_rot_heads; ++h) {
            const TI* xh = x + h * head_dim;
            TO* yh = y + h * head_dim;
            for (int i0 = 0; i0 < half; i0 += L) {
              const int n = half - i0 < L ? half - i0 : L;
              float x1[L], x2[L], c[L], s[L];
              for (int l = 0; l < n; ++l) {
                x1[l] = xh[i0 + l];
                x2[l] = xh[half + i0 + l];
                c[l] = cs[i0 + l];
                s[l] = sign * cs[half + i0 + l];
              }
              for (int l = 0; l < n; ++l) {
                yh[i0 + l] = TO(x1[l] * c[l] - x2[l] * s[l]);
                yh[half + i0 + l] = TO(x2[l] * c[l] + x1[l] * s[l]);
              }
            }
          }
          if (copy_rest)
            for (int c = rest; c < W; ++c) y[c] = TO(float(x[c]));
        });
  } else {
    // One (token, pair) per thread, heads in a loop: neighbouring threads touch neighbouring dims.
    // The heads go kHeads at a time, all their pairs loaded before any is stored, so that a thread
    // has 2 kHeads loads in flight (a store between them, which may alias the next load in place,
    // kept it at one pair).
    constexpr int kHeads = 4;
    detail::for_rows_columns<Shape::gpu>(
        exec, "kformer::rope", std::int64_t(B) * T, half, KOKKOS_LAMBDA(const std::int64_t bt, const std::int64_t i) {
          const int b = static_cast<int>(bt / T), t = static_cast<int>(bt % T);
          const float c = tab(pos_offset + t, 0, i), s = sign * tab(pos_offset + t, 1, i);
          for (int h0 = 0; h0 < n_rot_heads; h0 += kHeads) {
            const int n = n_rot_heads - h0 < kHeads ? n_rot_heads - h0 : kHeads;
            float x1[kHeads], x2[kHeads];
            for (int k = 0; k < kHeads; ++k)
              if (k < n) {
                const int j = (h0 + k) * head_dim + static_cast<int>(i);
                x1[k] = float(inp(b, t, j)), x2[k] = float(inp(b, t, j + half));
              }
            for (int k = 0; k < kHeads; ++k)
              if (k < n) {
                const int j = (h0 + k) * head_dim + static_cast<int>(i);
                out(b, t, j) = TO(x1[k] * c - x2[k] * s);
                out(b, t, j + half) = TO(x2[k] * c + x1[k] * s);
              }
          }
        });
    if (copy_rest) {
      detail::for_rows_columns<Shape::gpu>(
          exec, "kformer::rope_copy", std::int64_t(B) * T, W - rest,
          KOKKOS_LAMBDA(const std::int64_t bt, const std::int64_t c) {
            const int b = static_cast<int>(bt / T), t = static_cast<int>(bt % T);
            out(b, t, rest + c) = TO(float(inp(b, t, rest + c)));
          });
    }
  }
}
}  // namespace detail

// out (B,T,W) = inp with the first n_rot_heads heads (width head_dim, even) rotated.
template <Shape S = Shape::natural, class ExecSpace, class OutView, class InView>
void rope_forward(const ExecSpace& exec, const OutView& out, const InView& inp, int n_rot_heads, int head_dim, int pos_offset,
                  double theta = 10000.0) {
  const Call call("rope_forward", [&] {
    KernelCall c{Family::rope, holds_bf16<OutView>, false, bytes_of(out, inp)};
    c.shape = {std::int64_t(inp.extent(0)) * std::int64_t(inp.extent(1)), n_rot_heads, head_dim, 0, 0, 0};  // rows, heads, hd
    c.kept[0] = {"kformer::rope_table", detail::rope_table_bytes(pos_offset + int(inp.extent(1)), head_dim)};
    return c;
  });
  if (call.described()) return;
  detail::rope_apply<S>(exec, out, inp, n_rot_heads, head_dim, pos_offset, theta, 1.0f);
}

// dinp (B,T,W) = the inverse rotation of dout (rotations are orthogonal).
template <Shape S = Shape::natural, class ExecSpace, class DinpView, class DoutView>
void rope_backward(const ExecSpace& exec, const DinpView& dinp, const DoutView& dout, int n_rot_heads, int head_dim, int pos_offset,
                   double theta = 10000.0) {
  const Call call("rope_backward", [&] {
    KernelCall c{Family::rope, holds_bf16<DinpView>, true, bytes_of(dinp, dout)};
    c.shape = {std::int64_t(dout.extent(0)) * std::int64_t(dout.extent(1)), n_rot_heads, head_dim, 0, 0, 0};
    c.kept[0] = {"kformer::rope_table", detail::rope_table_bytes(pos_offset + int(dout.extent(1)), head_dim)};
    return c;
  });
  if (call.described()) return;
  detail::rope_apply<S>(exec, dinp, dout, n_rot_heads, head_dim, pos_offset, theta, -1.0f);
}

}  // namespace kformer::kernels
