// Softmax cross-entropy from logits, fused with its gradient, for a vocabulary split over tensor-
// parallel ranks. This rank holds logits (N, Vl) for vocabulary entries [v0, v0 + Vl); entries at
// or past `vocab` (the padding to a multiple of 64*tp) are masked: zero probability, zero gradient.
// Three passes, with the trainer's reductions over the TP group between them:
//   1. xent_local_max:   m_r(n) = max over this rank's valid entries        -> all-reduce MAX = M
//   2. xent_local_sums:  s_r(n) = sum exp(l - M), z_r(n) = l(target) if held -> all-reduce SUM
//   3. xent_finish:      loss(n) = log S + M - Z; dlogits = (exp(l - M) / S - onehot) * scale
// With one rank the reductions are the identity, and xent_whole_rows does all three in one.
// Rows are teams (passes 1 and 2, and 3 in the host shape) or runs of work items (pass 3 in the
// GPU shape) over the contiguous vocabulary entries, so a GPU's loads coalesce; S is the work
// shape (work_shape.hpp). The exponentials are
// fast_exp's (branch-free, so the host's loops over a row vectorise; libm's expf is a call an
// element, which left this loss at 0.09 of the copy on a CPU).
#pragma once

#include "call_record.hpp"
#include "fast_exp.hpp"

#include <cstdint>
#include <type_traits>

#include "kokkos_compat.hpp"
#include "team_reduce.hpp"
#include "view_types.hpp"
#include "work_shape.hpp"

namespace kformer::kernels {
namespace detail {
// Entries of this rank's Vl that are real vocabulary (v0 + j < vocab), the rest being padding.
inline int xent_valid_entries(int vocab, int v0, int Vl) {
  const int v = vocab - v0;
  return v < 0 ? 0 : (v < Vl ? v : Vl);
}

// A row's largest valid logit m and the sum of exp(l - m) over its valid entries (valid >= 1).
// GPU shape: in one read of the row (the online softmax of Milakov and Gimelshein, 2018): thread k
// keeps its own maximum and its sum relative to it over entries k, k + ts, ..., rescaling the sum
// when its maximum grows; then the team's maximum, and each thread's sum rescaled to it, added in
// the team reduce's fixed tree. A thread loads kXentInFlight entries (ts apart, so a warp's loads
// coalesce) before it uses any: several loads in flight, one rescale a group at most. Host shape:
// the maximum, then the sum (team_row_max, team_row_sum: one thread, its row in cache).
struct RowMaxSum {
  float max, sum;
};
constexpr int kXentInFlight = 4;
template <Shape S, class Member>
KOKKOS_INLINE_FUNCTION RowMaxSum xent_row_max_sum(const Member& team, int valid, const float* l) {
  if constexpr (S == Shape::gpu) {
    constexpr int K = kXentInFlight;
    const int ts = team.team_size();
    float m = -INFINITY, s = 0.f;
    for (int j0 = team.team_rank(); j0 < valid; j0 += K * ts) {
      float x[K];
      for (int k = 0; k < K; ++k) x[k] = j0 + k * ts < valid ? l[j0 + k * ts] : -INFINITY;
      float g = x[0];
      for (int k = 1; k < K; ++k) g = x[k] > g ? x[k] : g;
      if (g > m) {
        s *= fast_exp(m - g);  // fast_exp(-inf) is 0: the first group starts the sum afresh
        m = g;
      }
      for (int k = 0; k < K; ++k) s += fast_exp(x[k] - m);  // 0 for the -inf past the row's end
    }
    float all = m;
    team.team_reduce(Kokkos::Max<float>(all));
    float mine = m > -INFINITY ? s * fast_exp(m - all) : 0.f;  // a thread past the row's end holds none
    team.team_reduce(Kokkos::Sum<float>(mine));
    return {all, mine};
  } else {
    const float m = team_row_max<S>(team, valid, [&](int j) { return l[j]; });
    return {m, team_row_sum<S>(team, valid, [&](int j) { return fast_exp(l[j] - m); })};
  }
}

// xent_whole_rows keeps the exponentials in the gradient's row: an fp32 gradient in the host shape.
// (A variable template, not a local: nvcc's extended lambdas may not first-capture a local in an
// if-constexpr condition.)
template <Shape S0, class ExecSpace, class TD>
inline constexpr bool xent_keeps_exp = shape_for<S0, ExecSpace> == Shape::host && std::is_same_v<TD, float>;
}  // namespace detail

// lmax (N): the largest valid logit of each row on this rank (-inf when it holds none).
template <Shape S0 = Shape::natural, class ExecSpace>
void xent_local_max(const ExecSpace& exec, const DView<float*, ExecSpace>& lmax,
                    const DView<const float**, ExecSpace>& logits, int v0, int vocab) {
  const Call call("xent_local_max", [&] {
    KernelCall c{Family::cross_entropy, false, false, bytes_of(lmax, logits)};
    c.shape = {std::int64_t(logits.extent(0)), std::int64_t(logits.extent(1)), 0, 0, 0, 0};  // rows, Vl
    return c;
  });
  if (call.described()) return;
  constexpr Shape S = shape_for<S0, ExecSpace>;
  const int N = static_cast<int>(logits.extent(0));
  const int valid = detail::xent_valid_entries(vocab, v0, int(logits.extent(1)));
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "kformer::xent_local_max", Policy(exec, N, Kokkos::AUTO), KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int n = team.league_rank();
        const float m = valid > 0 ? detail::team_row_max<S>(team, valid, [&](int j) { return logits(n, j); })
                                  : -INFINITY;
        Kokkos::single(Kokkos::PerTeam(team), [&]() { lmax(n) = m; });
      });
}

// stats (2,N): row 0 the sum of exp(l - gmax) over valid entries, row 1 the target's logit when
// this rank holds the target (else 0).
template <Shape S0 = Shape::natural, class ExecSpace>
void xent_local_sums(const ExecSpace& exec, const DView<float**, ExecSpace>& stats,
                     const DView<const float**, ExecSpace>& logits, const DView<const std::int32_t*, ExecSpace>& targets,
                     const DView<const float*, ExecSpace>& gmax, int v0, int vocab) {
  const Call call("xent_local_sums", [&] {
    KernelCall c{Family::cross_entropy, false, false, bytes_of(stats, logits, targets, gmax)};
    c.shape = {std::int64_t(logits.extent(0)), std::int64_t(logits.extent(1)), 0, 0, 0, 0};
    return c;
  });
  if (call.described()) return;
  constexpr Shape S = shape_for<S0, ExecSpace>;
  const int N = static_cast<int>(logits.extent(0)), Vl = static_cast<int>(logits.extent(1));
  const int valid = detail::xent_valid_entries(vocab, v0, Vl);
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "kformer::xent_local_sums", Policy(exec, N, Kokkos::AUTO), KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int n = team.league_rank();
        const float m = gmax(n);
        const float s = detail::team_row_sum<S>(team, valid, [&](int j) { return detail::fast_exp(logits(n, j) - m); });
        Kokkos::single(Kokkos::PerTeam(team), [&]() {
          const int j = targets(n) - v0;
          stats(0, n) = s;
          stats(1, n) = (j >= 0 && j < Vl) ? logits(n, j) : 0.f;
        });
      });
}

// loss (N) = log S + M - Z; dlogits (N,Vl) = (softmax - onehot) * scale, 0 on padding.
// dlogits may alias logits (the logits are dead once the gradient exists), or be bf16 (mixed
// precision: the head's backward GEMM reads it; the loss and softmax stay fp32).
template <Shape S = Shape::natural, class ExecSpace, class DlogitsView>
void xent_finish(const ExecSpace& exec, const DView<float*, ExecSpace>& loss, const DlogitsView& dlogits,
                 const DView<const float**, ExecSpace>& logits, const DView<const std::int32_t*, ExecSpace>& targets,
                 const DView<const float*, ExecSpace>& gmax, const DView<const float**, ExecSpace>& stats, int v0,
                 int vocab, float scale) {
  const Call call("xent_finish", [&] {
    KernelCall c{Family::cross_entropy, holds_bf16<DlogitsView>, true, bytes_of(loss, dlogits, logits, targets, gmax, stats)};
    c.shape = {std::int64_t(logits.extent(0)), std::int64_t(logits.extent(1)), 0, 0, 0, 0};
    return c;
  });
  if (call.described()) return;
  using TD = typename DlogitsView::non_const_value_type;
  const std::int64_t N = logits.extent(0), Vl = logits.extent(1);
  Kokkos::parallel_for(
      "kformer::xent_loss", Kokkos::RangePolicy<ExecSpace>(exec, 0, N), KOKKOS_LAMBDA(const std::int64_t n) {
        loss(n) = kmath::log(stats(0, n)) + gmax(n) - stats(1, n);
      });
  if constexpr (shape_for<S, ExecSpace> == Shape::host) {
    // A row a team, its maximum, sum and target read once, the loop over the row's entries left
    // to the compiler to vectorise.
    const std::int64_t valid = detail::xent_valid_entries(vocab, v0, int(Vl));
    using Policy = Kokkos::TeamPolicy<ExecSpace>;
    Kokkos::parallel_for(
        "kformer::xent_dlogits", Policy(exec, N, Kokkos::AUTO),
        KOKKOS_LAMBDA(const typename Policy::member_type& team) {
          const int n = team.league_rank();
          const float m = gmax(n), sum = stats(0, n);
          const std::int64_t target = targets(n) - v0;
          const float* l = &logits(n, 0);
          TD* d = &dlogits(n, 0);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Vl), [&](const std::int64_t j) {
            const float p = j < valid ? detail::fast_exp(l[j] - m) / sum : 0.f;
            d[j] = TD(j < valid ? (p - (j == target ? 1.f : 0.f)) * scale : 0.f);
          });
        });
  } else {
    detail::for_rows_columns<S>(
        exec, "kformer::xent_dlogits", N, Vl, KOKKOS_LAMBDA(const std::int64_t n, const std::int64_t j) {
          const bool valid = v0 + j < vocab;
          const float p = valid ? detail::fast_exp(logits(n, j) - gmax(n)) / stats(0, n) : 0.f;
          const float onehot = (targets(n) - v0 == j) ? 1.f : 0.f;
          dlogits(n, j) = TD(valid ? (p - onehot) * scale : 0.f);
        });
  }
}

// sums(0) += the sum of the per-token losses (N), in double, on the device: no value reaches the
// host, so a step reads its loss once. sums (2): this call's sum lands in sums(1), then is added
// to the running total sums(0), so micro-batches add up in the order they ran (as the host sum
// they replace did, bit for bit).
template <class ExecSpace>
void xent_loss_accumulate(const ExecSpace& exec, const DView<double*, ExecSpace>& sums,
                          const DView<const float*, ExecSpace>& loss) {
  const Call call("xent_loss_accumulate", [&] {
    return KernelCall{Family::cross_entropy, false, false, bytes_of(sums, loss)};
  });
  if (call.described()) return;
  Kokkos::parallel_reduce(
      "kformer::xent_loss_sum", Kokkos::RangePolicy<ExecSpace>(exec, 0, loss.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i, double& acc) { acc += loss(i); }, Kokkos::subview(sums, 1));
  Kokkos::parallel_for(
      "kformer::xent_loss_total", Kokkos::RangePolicy<ExecSpace>(exec, 0, 1),
      KOKKOS_LAMBDA(const int) { sums(0) += sums(1); });
}

// The three passes in one, for one rank holding the whole vocabulary (tp = 1, v0 = 0, no
// reductions between them): a team takes a row and finds its maximum, sums exp(l - max), then
// writes the loss and the row's gradient. On a CPU a core's row (197 KiB of GPT-2's padded
// vocabulary) stays in its L2, so the row comes from memory once, where the three passes read it from
// memory three times; the same arithmetic as the passes, in the same order, so the same bits. On a
// GPU a team per row keeps about a thousand rows in flight, more than its L2 holds, so the row comes
// from memory for each read: the GPU shape finds the maximum and the sum in one read
// (xent_row_max_sum) with several loads in flight a thread, two reads and a write where the passes
// take three and a write, each read one load at a time (calibrate's three passes ran at 1241 GB/s of
// their own traffic on an H200, 0.42 of the copy: session 50's own.yaml); it agrees with the passes
// within rounding. The call records the bytes its shape reads (what predict costs it at: the
// cache's help is not assumed).
// dlogits may alias logits (the target's logit is read before the row is written) or be bf16.
template <Shape S0 = Shape::natural, class ExecSpace, class DlogitsView>
void xent_whole_rows(const ExecSpace& exec, const DView<float*, ExecSpace>& loss, const DlogitsView& dlogits,
                     const DView<const float**, ExecSpace>& logits, const DView<const std::int32_t*, ExecSpace>& targets,
                     int vocab, float scale) {
  constexpr Shape S = shape_for<S0, ExecSpace>;
  const Call call("xent_whole_rows", [&] {
    // The row read twice (GPU shape: on a device, or described as kformer's CUDA build) or thrice.
    const bool gpu = S == Shape::gpu || (S0 == Shape::natural && described_as_cuda());
    const double rereads = gpu ? 1 : 2;
    KernelCall c{Family::cross_entropy, holds_bf16<DlogitsView>, true,
                 bytes_of(loss, dlogits, logits, targets) + rereads * bytes_of(logits)};
    c.shape = {std::int64_t(logits.extent(0)), std::int64_t(logits.extent(1)), 0, 0, 0, 0};  // rows, Vp
    return c;
  });
  if (call.described()) return;
  using TD = typename DlogitsView::non_const_value_type;
  const int N = static_cast<int>(logits.extent(0)), Vl = static_cast<int>(logits.extent(1));
  const int valid = detail::xent_valid_entries(vocab, 0, Vl);
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for(
      "kformer::xent_whole_rows", Policy(exec, N, Kokkos::AUTO), KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int n = team.league_rank();
        const float* l = &logits(n, 0);
        TD* d = &dlogits(n, 0);
        const int target = targets(n);
        const float z = (target >= 0 && target < Vl) ? l[target] : 0.f;
        const int nv = valid;  // (nvcc: no capture may first appear inside an if-constexpr)
        float& row_loss = loss(n);
        const float sc = scale;
        if constexpr (detail::xent_keeps_exp<S0, ExecSpace, TD>) {
          const float m = nv > 0 ? detail::team_row_max<S>(team, nv, [&](int j) { return l[j]; }) : -INFINITY;
          // An fp32 gradient on the host, a team of one thread (OpenMP's and Serial's; a team of
          // several would each sum the whole row, one overwriting what another still reads in place):
          // the sum (team_row_sum's host form) leaves each exponential in the gradient's row, which
          // the last loop divides there: one exponential a logit fewer, the same values, the same bits.
          if (team.team_size() == 1) {
            const float sum = detail::sum_by_lanes(nv, [&](int j) {
              const float e = detail::fast_exp(l[j] - m);
              d[j] = e;
              return e;
            });
            row_loss = kmath::log(sum) + m - z;
            for (int j = 0; j < Vl; ++j) {
              const float p = j < nv ? d[j] / sum : 0.f;
              d[j] = j < nv ? (p - (j == target ? 1.f : 0.f)) * sc : 0.f;
            }
            return;
          }
        }
        const detail::RowMaxSum ms = nv > 0 ? detail::xent_row_max_sum<S>(team, nv, l) : detail::RowMaxSum{-INFINITY, 0.f};
        const float m = ms.max, sum = ms.sum;
        team.team_barrier();  // every thread has read z and its part of the row before any is written
        Kokkos::single(Kokkos::PerTeam(team), [&]() { row_loss = kmath::log(sum) + m - z; });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Vl), [&](const int j) {
          const float p = j < nv ? detail::fast_exp(l[j] - m) / sum : 0.f;
          d[j] = TD(j < nv ? (p - (j == target ? 1.f : 0.f)) * sc : 0.f);
        });
      });
}

// The loss and its gradient on one rank (the whole vocabulary held here, v0 = 0).
template <class ExecSpace>
void xent_forward_backward(const ExecSpace& exec, const DView<float*, ExecSpace>& loss,
                           const DView<float**, ExecSpace>& dlogits, const DView<const float**, ExecSpace>& logits,
                           const DView<const std::int32_t*, ExecSpace>& targets, int vocab, float scale) {
  xent_whole_rows(exec, loss, dlogits, logits, targets, vocab, scale);
}

}  // namespace kformer::kernels
