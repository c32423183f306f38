// Tile configurations of the native GEMM (gemm_native.hpp), one per kind of execution space, as
// types so that a test can run the GPU's configuration on a host backend:
//
// - GemmHostTiles: the shared-packing driver (both operands packed once per call into a
//   workspace, MR x NR register micro-kernel, see gemm_native.hpp).
// - GemmTeamTiles<...>: the team driver (gemm_team.hpp): one team per TM x TN tile of C, K
//   staged through team scratch in chunks of TK, an RM x RN micro-tile per thread in registers.
// - GemmGpuTiles: the team driver with two of those, 128 x 128 tiles where the matrix has enough
//   of them to fill a GPU and 64 x 64 tiles where it has not (the 256-token Llama layers).
//
// GemmTiles<ExecSpace> picks GemmHostTiles on host execution spaces and GemmGpuTiles otherwise.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <type_traits>

#include "view_types.hpp"

// AVX2 + FMA without AVX-512 (e.g. a -march=x86-64-v3 build, Haswell to Zen 3): the host GEMM
// runs gemm_micro_kernel.hpp's hand-written 6 x 16 micro-kernel, since GCC vectorises the plain
// loops for 16 ymm registers with permutes and spills. An AVX-512 build keeps the plain loops.
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__) && !defined(__CUDACC__) && \
    !defined(__HIPCC__)
#define KFORMER_HAVE_AVX2_MICRO_KERNEL 1
#else
#define KFORMER_HAVE_AVX2_MICRO_KERNEL 0
#endif

namespace kformer::kernels {

// Host: MR x NR accumulators fill the vector registers, chosen by the ISA the build targets:
// 8 x 2 zmm with AVX-512 (16 of 32 registers), 6 x 2 ymm with AVX2 (12 of 16, the rest for B and
// the broadcast A; 8 x 2 ymm left none for them and ran at half OpenBLAS's rate), 8 x 16 floats
// otherwise. A TM x TK block of packed A stays in
// L2 and one TK x NR panel of B in L1. Both operands are packed once per call into a workspace
// shared by all threads, so TM and TN only set the size of a work item.
struct GemmHostTiles {
  static constexpr bool shared_pack = true;
#if defined(__AVX512F__)
  static constexpr int MR = 8, NR = 32;
#elif KFORMER_HAVE_AVX2_MICRO_KERNEL
  static constexpr int MR = 6, NR = 16;
#else
  static constexpr int MR = 8, NR = 16;
#endif
  static constexpr int TM = 24 * MR, TN = 8 * NR, TK = 256;
};

// The team driver's configuration. A thread's RM rows (RN columns) come in groups of V = 4
// adjacent ones, the groups TM / (RM / V) rows apart: so that a warp's reads of one k row of
// scratch are whole float4s side by side (bank-conflict free), and its writes of C runs of
// adjacent columns. Scratch rows (one per k, TM or TN floats) are padded by `pad` floats: with
// TK * pad = 32 and TM, TN multiples of 32, the transposing stores of an operand contiguous along
// k (a warp: 32 / TK rows x TK k) hit 32 distinct banks; pad is a multiple of 4 so that rows stay
// 16-byte aligned.
template <int TM_, int TN_, int TK_, int RM_, int RN_>
struct GemmTeamTiles {
  static constexpr bool shared_pack = false;
  static constexpr int TM = TM_, TN = TN_, TK = TK_, RM = RM_, RN = RN_, V = 4;
  static constexpr int TY = TM / RM, TX = TN / RN, threads = TX * TY;
  static constexpr int pad = TK <= 8 ? 32 / TK : 4;
  static constexpr int lda = TM + pad, ldb = TN + pad;  // scratch row lengths (floats)
  // Two buffers (double buffering) of a TK x TM chunk of A and a TK x TN chunk of B.
  static constexpr std::size_t scratch_bytes = 2 * sizeof(float) * std::size_t(TK) * (lda + ldb);
  // Elements of each operand chunk one thread stages.
  static constexpr int stage_a = TK * TM / threads, stage_b = TK * TN / threads;
  // A single configuration: the driver always uses it.
  using Large = GemmTeamTiles;
  using Small = GemmTeamTiles;
  static constexpr int min_large_teams = 0;

  static_assert(RM % V == 0 && RN % V == 0 && TM % RM == 0 && TN % RN == 0, "micro-tiles must tile the team tile");
  static_assert(threads % TK == 0 && threads % TM == 0 && threads % TN == 0 && TK * TM % threads == 0 &&
                    TK * TN % threads == 0,
                "every thread stages the same number of elements, in a fixed row or k");
  static_assert(pad % 4 == 0, "scratch rows must stay 16-byte aligned");
};

// GPU: 128 x 128 x 8 per team of 256 threads, 8 x 8 per thread (64 accumulators in registers,
// 16 floats of scratch read per 64 FMAs); 64 x 64 x 8 with 4 x 4 per thread where the 128 x 128
// tiles would number fewer than min_large_teams (about two per SM of an A100 or H100).
// 2 x 8 x (132 + 132) floats of scratch, 16.5 KiB, for the large tiles.
struct GemmGpuTiles {
  static constexpr bool shared_pack = false;
  using Large = GemmTeamTiles<128, 128, 8, 8, 8>;
  using Small = GemmTeamTiles<64, 64, 8, 4, 4>;
  static constexpr int min_large_teams = 256;
};

template <class ExecSpace>
struct GemmTiles : std::conditional_t<runs_on_host<ExecSpace>, GemmHostTiles, GemmGpuTiles> {};

}  // namespace kformer::kernels
