// The cos/sin table of rotary position embedding, kept from one call to the next: every layer of
// every step rotates with the same angles, and computing pow/cos/sin per (token, pair) in double
// took most of RoPE's time. table(pos, i) = (cos, sin) of pos * theta^(-2i/head_dim) for pairs
// i < head_dim/2 (cos and sin as two contiguous rows per position), angles in double and rounded to float once (as before). One table per memory
// space, for the last (head_dim, theta) asked, grown to cover the largest position asked;
// released at Kokkos::finalize.
#pragma once

#include <Kokkos_Core.hpp>

#include <mutex>

#include "kokkos_compat.hpp"

namespace kformer::kernels::detail {

// Table (P, 2, half): (pos, 0, i) = cos, (pos, 1, i) = sin.
template <class MemorySpace>
using RopeTableView = Kokkos::View<float***, Kokkos::LayoutRight, MemorySpace>;

// Positions a table made for npos covers: grown in steps, positions of later calls are likely covered.
inline int rope_table_positions(int npos) { return (npos + 1023) / 1024 * 1024; }
// Its bytes (the buffer RoPE keeps between calls).
inline double rope_table_bytes(int npos, int head_dim) { return 4.0 * rope_table_positions(npos) * 2.0 * (head_dim / 2); }

// A table covering positions [0, npos) for (head_dim, theta), filled on exec if it had to be
// (re)built. The returned View keeps its memory alive even if a later call replaces the table.
template <class ExecSpace>
RopeTableView<typename ExecSpace::memory_space> rope_table(const ExecSpace& exec, int npos, int head_dim,
                                                           double theta) {
  using View = RopeTableView<typename ExecSpace::memory_space>;
  struct State {
    std::mutex mutex;
    View table;
    int head_dim = 0;
    double theta = 0;
    bool hooked = false;
  };
  static State st;
  std::lock_guard<std::mutex> lock(st.mutex);
  const int half = head_dim / 2;
  if (st.table.extent(0) >= std::size_t(npos) && st.table.extent(0) > 0 && st.head_dim == head_dim && st.theta == theta) return st.table;
  const int P = rope_table_positions(npos);
  st.table = {};
  st.table = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kformer::rope_table"), P, 2, half);
  st.head_dim = head_dim;
  st.theta = theta;
  if (!st.hooked) {
    Kokkos::push_finalize_hook([] {
      st.table = {};
      st.hooked = false;
    });
    st.hooked = true;
  }
  const View t = st.table;
  Kokkos::parallel_for(
      "kformer::rope_table",
      Kokkos::MDRangePolicy<ExecSpace, kernels::RightRank<2>>(exec, {0, 0}, {std::int64_t(P), std::int64_t(half)}),
      KOKKOS_LAMBDA(const std::int64_t p, const std::int64_t i) {
        const double inv_freq = kmath::pow(theta, -2.0 * static_cast<double>(i) / head_dim);
        const double angle = static_cast<double>(p) * inv_freq;
        t(p, 0, i) = static_cast<float>(kmath::cos(angle));
        t(p, 1, i) = static_cast<float>(kmath::sin(angle));
      });
  return t;
}

}  // namespace kformer::kernels::detail
