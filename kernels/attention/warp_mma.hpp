// One warp's products on the tensor cores in fp32, for the tensor-core shape of the fused
// attention (attention_tc_forward.hpp, attention_tc_backward.hpp): mma.sync m16n8k8 with tf32
// inputs, three per step (3xTF32: each fp32 operand split into its tf32 rounding and the tf32
// rounding of what that leaves, then rest x head + head x rest + head x head, which keeps fp32's
// accuracy; CUTLASS's OpMultiplyAddFastF32, which PyTorch's fp32 memory-efficient attention runs).
// Which lane holds which element of each fragment is the PTX ISA's ("Matrix Fragments for
// mma.m16n8k8", .tf32), lane = 4 g + t. On a host backend one thread plays the 32 lanes: it keeps
// every lane's registers, builds each lane's fragments exactly as a device lane does, and computes
// the step from those fragments as the tensor core would, so the host tests check the kernels'
// use of the layout; on a CUDA device of compute capability 8.0 or more each lane issues the
// instruction.
#pragma once

#include "view_types.hpp"

#include <cstdint>
#include <cstring>

namespace kformer::kernels::detail {

constexpr int kWarpLanes = 32;

#if defined(__CUDA_ARCH__)
#define KFORMER_TC_UNROLL _Pragma("unroll")
#else
#define KFORMER_TC_UNROLL
#endif

// Element i of lane l's fragment, as (row, column): A (16 x 8, rows m, columns k) i < 4, B
// (8 x 8, rows k, columns n) i < 2, C and D (16 x 8) i < 4.
KOKKOS_INLINE_FUNCTION int mma_a_row(int l, int i) { return (l >> 2) + 8 * (i & 1); }
KOKKOS_INLINE_FUNCTION int mma_a_col(int l, int i) { return (l & 3) + 4 * (i >> 1); }
KOKKOS_INLINE_FUNCTION int mma_b_row(int l, int i) { return (l & 3) + 4 * i; }
KOKKOS_INLINE_FUNCTION int mma_b_col(int l, int) { return l >> 2; }
KOKKOS_INLINE_FUNCTION int mma_c_row(int l, int i) { return (l >> 2) + 8 * (i >> 1); }
KOKKOS_INLINE_FUNCTION int mma_c_col(int l, int i) { return 2 * (l & 3) + (i & 1); }

// Registers of each lane of NW warps, N floats a lane: on a device each thread is one (warp,
// lane) and holds its own; on the host one thread holds them all.
template <class ExecSpace, int NW, int N>
struct WarpRegs {
  static constexpr int warps = runs_on_host<ExecSpace> ? NW : 1;
  static constexpr int lanes = runs_on_host<ExecSpace> ? kWarpLanes : 1;
  float r[warps][lanes][N];
  KOKKOS_INLINE_FUNCTION float* at(int w, int l) { return r[warps == 1 ? 0 : w][lanes == 1 ? 0 : l]; }
};

// f(lane) for this thread's lane on a device, for every lane in turn on the host. Called by
// the whole warp: between two calls the lanes' registers are consistent.
template <class ExecSpace, class F>
KOKKOS_INLINE_FUNCTION void each_lane(const F& f) {
  if constexpr (runs_on_host<ExecSpace>) {
    for (int l = 0; l < kWarpLanes; ++l) f(l);
  } else {
#if defined(__CUDA_ARCH__)
    f(static_cast<int>(threadIdx.x));
#endif
  }
}

// Every float of the warp's registers x set to v.
template <class ExecSpace, int NW, int N>
KOKKOS_INLINE_FUNCTION void fill_warp(WarpRegs<ExecSpace, NW, N>& x, int w, float v) {
  each_lane<ExecSpace>([&](int l) {
    KFORMER_TC_UNROLL
    for (int k = 0; k < N; ++k) x.at(w, l)[k] = v;
  });
}

// f(k, r, c) for each float k < 4 NT of lane l's NT C fragments: its row r < 16 and column c < 8 NT.
template <int NT, class F>
KOKKOS_INLINE_FUNCTION void for_each_c_element(int l, const F& f) {
  KFORMER_TC_UNROLL
  for (int k = 0; k < 4 * NT; ++k) f(k, mma_c_row(l, k & 3), 8 * (k >> 2) + mma_c_col(l, k & 3));
}

// Each of the N values of every lane replaced by op over the four lanes 4g..4g+3 (which hold
// the same two rows of a C fragment). The same result in all four.
template <class ExecSpace, int NW, int N, class Op>
KOKKOS_INLINE_FUNCTION void quad_allreduce(WarpRegs<ExecSpace, NW, N>& x, int w, const Op& op) {
  if constexpr (runs_on_host<ExecSpace>) {
    for (int g = 0; g < kWarpLanes / 4; ++g)
      for (int k = 0; k < N; ++k) {
        const float lo = op(x.at(w, 4 * g)[k], x.at(w, 4 * g + 1)[k]);
        const float a = op(lo, op(x.at(w, 4 * g + 2)[k], x.at(w, 4 * g + 3)[k]));
        for (int t = 0; t < 4; ++t) x.at(w, 4 * g + t)[k] = a;
      }
  } else {
#if defined(__CUDA_ARCH__)
    float* p = x.at(w, 0);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float a = op(p[k], __shfl_xor_sync(0xffffffffu, p[k], 1));
      p[k] = op(a, __shfl_xor_sync(0xffffffffu, a, 2));
    }
#endif
  }
}

// x rounded to tf32 (10 stored mantissa bits), to nearest with ties away from zero, as PTX's
// cvt.rna.tf32.f32; infinities and NaNs as they are.
KOKKOS_INLINE_FUNCTION float tf32_rna(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &u, sizeof u);
  return x;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ inline std::uint32_t tf32_bits(float x) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// x as its tf32 rounding hi and the tf32 rounding of what that leaves, lo (3xTF32's two terms).
__device__ inline void split_tf32(float x, std::uint32_t& hi, std::uint32_t& lo) {
  hi = tf32_bits(x);
  lo = tf32_bits(x - __uint_as_float(hi));
}
__device__ inline void mma_tf32(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

// The host's tensor core: d += A B (16 x 8 x 8) for each 3xTF32 term in turn, from every lane's
// fragments fa (4 floats) and fb (2 floats), each sum over k in order.
KOKKOS_INLINE_FUNCTION void emulated_mma_3xtf32(float (&d)[16][8], const float (&fa)[kWarpLanes][4],
                                                const float (&fb)[kWarpLanes][2]) {
  float ah[16][8], al[16][8], bh[8][8], bl[8][8];
  for (int l = 0; l < kWarpLanes; ++l) {
    for (int i = 0; i < 4; ++i) {
      const float x = fa[l][i], h = tf32_rna(x);
      ah[mma_a_row(l, i)][mma_a_col(l, i)] = h;
      al[mma_a_row(l, i)][mma_a_col(l, i)] = tf32_rna(x - h);
    }
    for (int i = 0; i < 2; ++i) {
      const float x = fb[l][i], h = tf32_rna(x);
      bh[mma_b_row(l, i)][mma_b_col(l, i)] = h;
      bl[mma_b_row(l, i)][mma_b_col(l, i)] = tf32_rna(x - h);
    }
  }
  const float (*terms[3][2])[8] = {{al, bh}, {ah, bl}, {ah, bh}};
  for (const auto& t : terms)
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        float s = d[m][n];
        for (int k = 0; k < 8; ++k) s += t[0][m][k] * t[1][k][n];
        d[m][n] = s;
      }
}

// A product that sums over the columns of C fragments the warp holds (P V, dS K, P^T dO, dS^T Q)
// takes them as its A operand where they are, never through shared memory. In m16n8k8's layouts
// lane 4 g + t holds C columns 2 t and 2 t + 1 of rows g and g + 8, and takes A columns t and t + 4
// of the same rows; so each k-step's eight columns are taken in the order 0 2 4 6 1 3 5 7: A's column
// t is C's column 2 t and A's t + 4 is C's 2 t + 1. Element i of the A fragment at k-step ks is then
// the lane's own float c_as_a_index(ks, i), and B's row k is the other side's row c_order_row(k).
// (FlashAttention-2 does this in fp16, whose k16 layouts agree without reordering.)
KOKKOS_INLINE_FUNCTION int c_as_a_index(int ks, int i) { return 4 * ks + 2 * (i & 1) + (i >> 1); }
KOKKOS_INLINE_FUNCTION int c_order_row(int k) { return (k & ~7) | (2 * (k & 3)) | ((k >> 2) & 1); }

// The C fragments held in c as warp_product's A operand (af), in c_order_row's order.
template <class Regs>
struct CFragmentsAsA {
  Regs& c;
  int w;
  KOKKOS_INLINE_FUNCTION float operator()(int ks, int i, int l) const { return c.at(w, l)[c_as_a_index(ks, i)]; }
};
template <class Regs>
KOKKOS_INLINE_FUNCTION CFragmentsAsA<Regs> c_as_a(Regs& c, int w) {
  return CFragmentsAsA<Regs>{c, w};
}

// The warp's acc += A B over the first `used_k` (<= KS) k-steps of 8: A (16 x 8 used_k) as af(ks, i, l),
// element i of lane l's fragment at k-step ks (registers that hold the fragments serve as they
// are, c_as_a); B (8 used_k x 8 NT) as b(k, n). acc holds NT C fragments per
// lane (floats 4 nt .. 4 nt + 3 of tile nt, columns 8 nt .. 8 nt + 7), of which the first `used_n`
// are computed. af and b return fp32 values and must be valid wherever they are asked.
template <class ExecSpace, int NT, int KS, int NW, int N, class AF, class FB>
KOKKOS_INLINE_FUNCTION void warp_product(WarpRegs<ExecSpace, NW, N>& acc, int w, int used_n, int used_k, const AF& af,
                                         const FB& b) {
  static_assert(N >= 4 * NT, "warp_product: the accumulator holds NT fragments a lane");
  if constexpr (runs_on_host<ExecSpace>) {
    float fa[kWarpLanes][4], fb[kWarpLanes][2], d[16][8];
    for (int ks = 0; ks < used_k; ++ks) {
      for (int l = 0; l < kWarpLanes; ++l)
        for (int i = 0; i < 4; ++i) fa[l][i] = af(ks, i, l);
      for (int nt = 0; nt < used_n; ++nt) {
        for (int l = 0; l < kWarpLanes; ++l) {
          for (int i = 0; i < 2; ++i) fb[l][i] = b(8 * ks + mma_b_row(l, i), 8 * nt + mma_b_col(l, i));
          for (int i = 0; i < 4; ++i) d[mma_c_row(l, i)][mma_c_col(l, i)] = acc.at(w, l)[4 * nt + i];
        }
        emulated_mma_3xtf32(d, fa, fb);
        for (int l = 0; l < kWarpLanes; ++l)
          for (int i = 0; i < 4; ++i) acc.at(w, l)[4 * nt + i] = d[mma_c_row(l, i)][mma_c_col(l, i)];
      }
    }
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int l = static_cast<int>(threadIdx.x);
    float* c = acc.at(w, l);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      if (ks < used_k) {
        std::uint32_t ah[4], al[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) split_tf32(af(ks, i, l), ah[i], al[i]);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if (nt < used_n) {
            std::uint32_t bh[2], bl[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) split_tf32(b(8 * ks + mma_b_row(l, i), 8 * nt + mma_b_col(l, i)), bh[i], bl[i]);
            float d[4] = {c[4 * nt], c[4 * nt + 1], c[4 * nt + 2], c[4 * nt + 3]};
            mma_tf32(d, al, bh);
            mma_tf32(d, ah, bl);
            mma_tf32(d, ah, bh);
#pragma unroll
            for (int i = 0; i < 4; ++i) c[4 * nt + i] = d[i];
          }
        }
      }
    }
#elif defined(__CUDA_ARCH__)
    Kokkos::abort("attention: the tensor-core shape needs a device of compute capability 8.0 or more");
#endif
  }
}

}  // namespace kformer::kernels::detail
