// Helpers the block's code paths share to run one body in fp32 and bf16 (T = float or bf16):
// block.cpp's forward/backward, block_sp.cpp's sequence parallel ones, block_split.cpp's B and W,
// recompute.cpp's selective recomputation. Shapes: N = B*T tokens, W a matrix's width.
#pragma once

#include <type_traits>

#include "model/block.hpp"
#include "comm/views.hpp"
#include "convert.hpp"
#include "gemm.hpp"

namespace kformer::block_typed {

template <class T>
using Unmanaged2 = Kokkos::View<T**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class T>
DV<T***> btw(const DV<T**>& x, const BlockDims& d) {  // (N,W) read as (B,T,W)
  return Kokkos::View<T***, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(x.data(), d.B, d.T,
                                                                                               x.extent(1));
}

// The first `rows` rows of x (a scratch larger than the rows a rank holds).
template <class T>
DV<T**> first_rows(const DV<T**>& x, int rows) {
  return Unmanaged2<T>(x.data(), rows, x.extent(1));
}

// Where a GEMM whose output is stored as T writes: the stored view itself in fp32; in bf16 an
// fp32 scratch of the same shape, rounded into the stored view afterwards (by the kernel that
// reads it, as RoPE, or by kernels::matmul_forward_stored's convert).
template <class T>
DV<float**> gemm_out(const DV<T**>& stored, const DV<float**>& scratch_f32) {
  if constexpr (std::is_same<T, float>::value)
    return stored;
  else
    return as_matrix(scratch_f32.data(), stored.extent(0), stored.extent(1));
}

// stored(N, out) = x W^T + b kept as T, and act = gelu(stored) when act has extent (GPT's FC1):
// in fp32 the GEMM writes `stored` itself; in bf16 kernels::matmul_forward_stored, which goes
// through the fp32 scratch only where the GEMM cannot write bf16 itself (kernels::gemm_writes_bf16).
template <class T>
void forward_stored(const Exec& exec, kernels::GemmImpl impl, const DV<T**>& stored, const DV<float**>& scratch_f32,
                    const DV<T**>& act, const DV<T**>& x, const DV<T**>& w, const DV<float*>& b) {
  if constexpr (std::is_same<T, float>::value) {
    if (act.extent(0) != 0)
      kernels::matmul_forward_gelu(exec, impl, stored, act, x, w, b);
    else
      kernels::matmul_forward(exec, impl, stored, x, w, b);
  } else {
    kernels::matmul_forward_stored(exec, impl, stored, gemm_out(stored, scratch_f32), act, x, w, b);
  }
}

// An fp32 gradient as a GEMM input of type T: itself in fp32, rounded into `buf` in bf16.
template <class T>
DV<T**> as_input(const Exec& exec, const DV<float**>& g, const DV<T**>& buf) {
  if constexpr (std::is_same<T, float>::value) {
    return g;
  } else {
    const DV<T**> b = Unmanaged2<T>(buf.data(), g.extent(0), g.extent(1));
    kernels::convert(exec, b, g);
    return b;
  }
}

// dx(N, in) = dy(N, out) w(out, in): kernels::matmul_backward's input half (zb-h1's B; W adds
// the weight half later).
template <class T>
void matmul_backward_input(kernels::GemmImpl impl, const DV<float**>& dx, const DV<T**>& dy, const DV<T**>& w) {
  kernels::matmul_backward_input(Exec(), impl, dx, DV<const T**>(dy), DV<const T**>(w));
}

// A matrix whose rows sequence parallelism splits over the TP ranks (sp > 1), whole: this rank's
// rows all-gathered into `whole` (N rows); without sequence parallelism, `rows` itself.
template <class T>
DV<T**> whole_of(comm::Communicator* tp, int sp, const DV<T**>& rows, const DV<T**>& whole,
                 comm::CallSite at = comm::CallSite::here()) {
  if (sp == 1) return rows;
  comm::allgather(*tp, rows, whole, at);
  return whole;
}

// The attention state a block's forward kept, with the backward's scratch (the naive kernel's
// datt, the fused one's delta) shared by every block of the rank: what attention_backward takes.
template <class T>
kernels::AttentionState<Exec, T> with_backward_scratch(const kernels::AttentionState<Exec, T>& kept,
                                              const kernels::AttentionState<Exec>& scratch) {
  kernels::AttentionState<Exec, T> att = kept;
  att.datt = scratch.datt;
  att.chunk = scratch.chunk;
  att.delta = scratch.delta;
  return att;
}

}  // namespace kformer::block_typed
