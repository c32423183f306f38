// Runs of P contiguous elements (float or bf16) read into and written from fp32 registers in
// 16-byte words: one 128-bit access per word on a CUDA device, where a thread's one 2- or 4-byte
// access at a time leaves a row kernel far from the bandwidth (norm_registers.hpp); on the host
// the same words through memcpy, so that the host tests decode and encode them exactly as the
// device does. A run must start 16-byte aligned and hold whole words (P * sizeof(T) a multiple
// of 16): runs_fit() says whether a view's rows allow it. P == 1 is a plain element access. Used by
// the norms, and by the GEMM epilogue and team GEMM for their runs of four floats.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "bf16.hpp"

namespace kformer::kernels::detail {

template <int P, class T>
KOKKOS_INLINE_FUNCTION void load_run(float* r, const T* p) {
  using U = std::remove_cv_t<T>;
  if constexpr (P == 1) {
    r[0] = float(p[0]);
  } else {
    static_assert(sizeof(U) == 4 || sizeof(U) == 2, "runs of float or bf16");
    static_assert(P * sizeof(U) % 16 == 0, "a run holds whole 16-byte words");
    constexpr int W = int(P * sizeof(U) / 4);  // 32-bit words
    std::uint32_t w[W];
    for (int q = 0; q < W / 4; ++q) {
#if defined(__CUDA_ARCH__)
      const uint4 u = reinterpret_cast<const uint4*>(p)[q];
      w[4 * q] = u.x, w[4 * q + 1] = u.y, w[4 * q + 2] = u.z, w[4 * q + 3] = u.w;
#else
      std::memcpy(w + 4 * q, reinterpret_cast<const unsigned char*>(p) + 16 * q, 16);
#endif
    }
    if constexpr (sizeof(U) == 4) {
      for (int i = 0; i < P; ++i) r[i] = bits_float(w[i]);
    } else {  // little-endian: the lower half of a word is the earlier element
      for (int i = 0; i < W; ++i) {
        r[2 * i] = bf16_bits_to_float(std::uint16_t(w[i] & 0xffffu));
        r[2 * i + 1] = bf16_bits_to_float(std::uint16_t(w[i] >> 16));
      }
    }
  }
}

// p[0, P) = T(r[0, P)): each value rounded as T(float) rounds it.
template <int P, class T>
KOKKOS_INLINE_FUNCTION void store_run(T* p, const float* r) {
  if constexpr (P == 1) {
    p[0] = T(r[0]);
  } else {
    static_assert(sizeof(T) == 4 || sizeof(T) == 2, "runs of float or bf16");
    static_assert(P * sizeof(T) % 16 == 0, "a run holds whole 16-byte words");
    constexpr int W = int(P * sizeof(T) / 4);
    std::uint32_t w[W];
    if constexpr (sizeof(T) == 4) {
      for (int i = 0; i < P; ++i) w[i] = float_bits(r[i]);
    } else {
      for (int i = 0; i < W; ++i)
        w[i] = std::uint32_t(bf16_bits_from_float(r[2 * i])) | (std::uint32_t(bf16_bits_from_float(r[2 * i + 1])) << 16);
    }
    for (int q = 0; q < W / 4; ++q) {
#if defined(__CUDA_ARCH__)
      reinterpret_cast<uint4*>(p)[q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
#else
      std::memcpy(reinterpret_cast<unsigned char*>(p) + 16 * q, w + 4 * q, 16);
#endif
    }
  }
}

// Whether every row of v (rank 1: its one row) can be read in runs of P elements from any
// multiple of P: contiguous columns, 16-byte aligned rows, a width that P divides.
template <int P, class View>
bool runs_fit(const View& v) {
  using T = typename View::value_type;
  const auto aligned = [](std::uintptr_t bytes) { return bytes % 16 == 0; };
  if (!aligned(reinterpret_cast<std::uintptr_t>(v.data()))) return false;
  if constexpr (View::rank == 1) {
    return v.extent(0) % P == 0 && (v.extent(0) <= 1 || v.stride(0) == 1);
  } else {
    static_assert(View::rank == 2, "rows of a matrix, or one row");
    return v.extent(1) % P == 0 && (v.extent(1) <= 1 || v.stride(1) == 1) &&
           aligned(std::uintptr_t(v.stride(0)) * sizeof(T));
  }
}

}  // namespace kformer::kernels::detail
