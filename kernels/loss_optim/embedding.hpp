// Token embedding (vocab-parallel) plus the learned position embedding (gpt), forward and
// backward. Rows are tokens: N = B*T, position of row n is n % T.
//
// Vocab-parallel: this rank holds rows [v0, v0 + Vl) of the (V_padded, C) table. A token outside
// the range contributes zeros, so the sum over TP ranks (the trainer's all-reduce) is the lookup.
//
// The backward scatter-add is deterministic: a TokenIndex lists, for each table row this rank
// holds that occurs in the batch, the rows of the batch that hold it in increasing order, so every
// gradient row is summed in the same order on every run, with no atomics.
//
// Every kernel runs over (row, channel) work items with channels contiguous (work_shape.hpp), so
// consecutive GPU threads read and write consecutive channels of a row.
#pragma once

#include "call_record.hpp"

#include <cstdint>
#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "view_types.hpp"
#include "work_shape.hpp"

namespace kformer::kernels {

template <class ExecSpace>
struct TokenIndex {
  DView<const std::int32_t*, ExecSpace> rows;       // (U) local table rows present in the batch
  DView<const std::int32_t*, ExecSpace> offsets;    // (U+1) into positions
  DView<const std::int32_t*, ExecSpace> positions;  // batch rows, grouped by table row, ascending
};

// int32 elements a token index over N tokens takes in its packed buffer: rows at [0, N),
// offsets at [N, 2N+1), positions at [2N+1, 3N+1) (U <= N table rows, P <= N positions).
inline std::size_t token_index_capacity(std::size_t N) { return 3 * N + 1; }

// The index of tokens (N) for table rows [v0, v0 + Vl), built on the host into `host` (packed,
// token_index_capacity(N) elements), returned as views into `device`: a device buffer of the same
// layout into which the caller copies `host` before embedding_backward reads it (one copy, which
// it may merge with others; nothing is allocated on the device here).
template <class ExecSpace>
TokenIndex<ExecSpace> make_token_index(const std::int32_t* tokens, std::size_t N, int v0, int Vl, std::int32_t* host,
                                       const DView<std::int32_t*, ExecSpace>& device) {
  if (device.extent(0) < token_index_capacity(N))
    throw std::invalid_argument("make_token_index: the device buffer holds fewer than 3N+1 elements");
  std::vector<std::pair<std::int32_t, std::int32_t>> held;  // (table row, batch row), sorted: grouped, ascending
  held.reserve(N);
  for (std::size_t n = 0; n < N; ++n)
    if (tokens[n] >= v0 && tokens[n] < v0 + Vl) held.emplace_back(tokens[n] - v0, static_cast<std::int32_t>(n));
  std::sort(held.begin(), held.end());
  std::int32_t* rows = host;
  std::int32_t* offs = host + N;
  std::int32_t* pos = host + 2 * N + 1;
  std::size_t u = 0;
  offs[0] = 0;
  for (std::size_t p = 0; p < held.size(); ++p) {
    if (p == 0 || held[p].first != held[p - 1].first) {
      if (p > 0) offs[++u] = static_cast<std::int32_t>(p);
      rows[u] = held[p].first;
    }
    pos[p] = held[p].second;
  }
  const std::size_t U = held.empty() ? 0 : u + 1;
  offs[U] = static_cast<std::int32_t>(held.size());
  using R = std::pair<std::size_t, std::size_t>;
  return {Kokkos::subview(device, R(0, U)), Kokkos::subview(device, R(N, N + U + 1)),
          Kokkos::subview(device, R(2 * N + 1, 2 * N + 1 + held.size()))};
}

// out (N,C) = wte(tok - v0) for tokens in [v0, v0 + Vl), else 0; plus wpe(n % T) when wpe is
// not empty (pass it on one TP rank only, so the all-reduce adds it once). The tables are fp32 or
// bf16 (a bf16 model whose fp32 masters are optimizer shards reads its embedding in bf16).
template <Shape S = Shape::natural, class ExecSpace, class Table, class PosTable>
void embedding_forward(const ExecSpace& exec, const DView<float**, ExecSpace>& out,
                       const DView<const std::int32_t*, ExecSpace>& tokens, const Table& wte, int v0,
                       const PosTable& wpe, int T) {
  const Call call("embedding_forward", [&] {
    const double pos_bytes = double(sizeof(typename PosTable::value_type)) * T * out.extent(1);
    return KernelCall{Family::embedding, false, false, bytes_of(out, out, tokens) + (wpe.extent(0) ? pos_bytes : 0.0)};
  });
  if (call.described()) return;
  const std::int64_t N = out.extent(0), C = out.extent(1);
  const int Vl = static_cast<int>(wte.extent(0));
  const bool pos = wpe.extent(0) > 0;
  detail::for_rows_columns<S>(
      exec, "kformer::embedding_forward", N, C, KOKKOS_LAMBDA(const std::int64_t n, const std::int64_t c) {
        const int r = tokens(n) - v0;
        float v = (r >= 0 && r < Vl) ? float(wte(r, c)) : 0.f;
        if (pos) v += float(wpe(n % T, c));
        out(n, c) = v;
      });
}

// dwte (Vl,C) += the rows of dout (N,C) grouped by token (index from make_token_index).
template <Shape S = Shape::natural, class ExecSpace>
void embedding_backward(const ExecSpace& exec, const DView<float**, ExecSpace>& dwte,
                        const DView<const float**, ExecSpace>& dout, const TokenIndex<ExecSpace>& idx) {
  const Call call("embedding_backward", [&] {
    return KernelCall{Family::embedding, false, true, bytes_of(dout, dout)};
  });
  if (call.described()) return;
  const std::int64_t U = idx.rows.extent(0), C = dout.extent(1);
  const auto rows = idx.rows;
  const auto offs = idx.offsets;
  const auto pos = idx.positions;
  detail::for_rows_columns<S>(
      exec, "kformer::embedding_backward", U, C, KOKKOS_LAMBDA(const std::int64_t u, const std::int64_t c) {
        float acc = 0.f;
        for (int p = offs(u); p < offs(u + 1); ++p) acc += dout(pos(p), c);
        dwte(rows(u), c) += acc;
      });
}

// dwpe (maxT,C) += sum over the B sequences of dout (N = B*T, C), rows t < T.
template <Shape S = Shape::natural, class ExecSpace>
void position_embedding_backward(const ExecSpace& exec, const DView<float**, ExecSpace>& dwpe,
                                 const DView<const float**, ExecSpace>& dout, int T) {
  const Call call("position_embedding_backward", [&] {
    return KernelCall{Family::embedding, false, true, bytes_of(dout) + 8.0 * T * dout.extent(1)};
  });
  if (call.described()) return;
  const std::int64_t C = dout.extent(1);
  const int B = static_cast<int>(dout.extent(0)) / T;
  detail::for_rows_columns<S>(
      exec, "kformer::position_embedding_backward", T, C, KOKKOS_LAMBDA(const std::int64_t t, const std::int64_t c) {
        float acc = 0.f;
        for (int b = 0; b < B; ++b) acc += dout(b * T + t, c);
        dwpe(t, c) += acc;
      });
}

}  // namespace kformer::kernels
