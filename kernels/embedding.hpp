// Token embedding (vocab-parallel) plus the learned position embedding (gpt), forward and
// backward. Rows are tokens: N = B*T, position of row n is n % T.
//
// Vocab-parallel: this rank holds rows [v0, v0 + Vl) of the (V_padded, C) table. A token outside
// the range contributes zeros, so the sum over TP ranks (the trainer's all-reduce) is the lookup.
//
// The backward scatter-add is deterministic: a TokenIndex lists, for each table row this rank
// holds that occurs in the batch, the rows of the batch that hold it in increasing order, so every
// gradient row is summed in the same order on every run, with no atomics.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "view_types.hpp"

namespace kformer::kernels {

template <class ExecSpace>
struct TokenIndex {
  DView<std::int32_t*, ExecSpace> rows;     // (U) local table rows present in the batch
  DView<std::int32_t*, ExecSpace> offsets;  // (U+1) into positions
  DView<std::int32_t*, ExecSpace> positions;  // batch rows, grouped by table row, ascending
};

// Built on the host from the host copy of the tokens (N), for table rows [v0, v0 + Vl).
template <class ExecSpace>
TokenIndex<ExecSpace> make_token_index(const std::vector<std::int32_t>& tokens, int v0, int Vl) {
  std::map<std::int32_t, std::vector<std::int32_t>> groups;
  for (std::size_t n = 0; n < tokens.size(); ++n)
    if (tokens[n] >= v0 && tokens[n] < v0 + Vl) groups[tokens[n] - v0].push_back(static_cast<std::int32_t>(n));
  const std::size_t U = groups.size();
  std::size_t P = 0;
  for (auto& g : groups) P += g.second.size();
  TokenIndex<ExecSpace> idx{DView<std::int32_t*, ExecSpace>("kformer::tok_rows", U),
                            DView<std::int32_t*, ExecSpace>("kformer::tok_offsets", U + 1),
                            DView<std::int32_t*, ExecSpace>("kformer::tok_positions", P)};
  auto rows = Kokkos::create_mirror_view(idx.rows);
  auto offs = Kokkos::create_mirror_view(idx.offsets);
  auto pos = Kokkos::create_mirror_view(idx.positions);
  std::size_t u = 0, p = 0;
  offs(0) = 0;
  for (auto& g : groups) {
    rows(u) = g.first;
    for (auto n : g.second) pos(p++) = n;
    offs(++u) = static_cast<std::int32_t>(p);
  }
  Kokkos::deep_copy(idx.rows, rows);
  Kokkos::deep_copy(idx.offsets, offs);
  Kokkos::deep_copy(idx.positions, pos);
  return idx;
}

// out (N,C) = wte(tok - v0) for tokens in [v0, v0 + Vl), else 0; plus wpe(n % T) when wpe is
// not empty (pass it on one TP rank only, so the all-reduce adds it once).
template <class ExecSpace>
void embedding_forward(const ExecSpace& exec, const DView<float**, ExecSpace>& out,
                       const DView<const std::int32_t*, ExecSpace>& tokens, const DView<const float**, ExecSpace>& wte,
                       int v0, const DView<const float**, ExecSpace>& wpe, int T) {
  const std::int64_t N = out.extent(0), C = out.extent(1);
  const int Vl = static_cast<int>(wte.extent(0));
  const bool pos = wpe.extent(0) > 0;
  Kokkos::parallel_for(
      "kformer::embedding_forward", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(exec, {0, 0}, {N, C}),
      KOKKOS_LAMBDA(const std::int64_t n, const std::int64_t c) {
        const int r = tokens(n) - v0;
        float v = (r >= 0 && r < Vl) ? wte(r, c) : 0.f;
        if (pos) v += wpe(n % T, c);
        out(n, c) = v;
      });
}

// dwte (Vl,C) += the rows of dout (N,C) grouped by token (index from make_token_index).
template <class ExecSpace>
void embedding_backward(const ExecSpace& exec, const DView<float**, ExecSpace>& dwte,
                        const DView<const float**, ExecSpace>& dout, const TokenIndex<ExecSpace>& idx) {
  const std::int64_t U = idx.rows.extent(0), C = dout.extent(1);
  const auto rows = idx.rows;
  const auto offs = idx.offsets;
  const auto pos = idx.positions;
  Kokkos::parallel_for(
      "kformer::embedding_backward", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(exec, {0, 0}, {U, C}),
      KOKKOS_LAMBDA(const std::int64_t u, const std::int64_t c) {
        float acc = 0.f;
        for (int p = offs(u); p < offs(u + 1); ++p) acc += dout(pos(p), c);
        dwte(rows(u), c) += acc;
      });
}

// dwpe (maxT,C) += sum over the B sequences of dout (N = B*T, C), rows t < T.
template <class ExecSpace>
void position_embedding_backward(const ExecSpace& exec, const DView<float**, ExecSpace>& dwpe,
                                 const DView<const float**, ExecSpace>& dout, int T) {
  const std::int64_t C = dout.extent(1);
  const int B = static_cast<int>(dout.extent(0)) / T;
  Kokkos::parallel_for(
      "kformer::position_embedding_backward",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(exec, {0, 0}, {std::int64_t(T), C}),
      KOKKOS_LAMBDA(const std::int64_t t, const std::int64_t c) {
        float acc = 0.f;
        for (int b = 0; b < B; ++b) acc += dout(b * T + t, c);
        dwpe(t, c) += acc;
      });
}

}  // namespace kformer::kernels
