// Tile configurations of the fused causal attention (attention_fused.hpp and its backward) and
// the team scratch each pass of the GPU-shaped kernels asks for. A configuration is a struct
// passed as a template parameter; FusedTile<ExecSpace> picks the one for an execution space,
// and tests pass GpuAttentionTile explicitly to run the device shape on Serial or OpenMP.
#pragma once

#include "view_types.hpp"

#include <type_traits>

namespace kformer::kernels {

// Host shape: one thread per team walks 64 query rows against 64-key tiles that stay in its
// caches, with loops the compiler vectorises (attention_fused.hpp's host kernels).
struct HostAttentionTile {
  static constexpr bool gpu_shaped = false;
  static constexpr int BQ = 64;  // query rows per team (key rows per team in the dK/dV pass)
  static constexpr int BK = 64;  // key rows per streamed tile
};

// Device shape, FlashAttention-2 style (attention_gpu_*.hpp). A team of `team` threads x
// `vector` lanes owns BQ rows (queries; keys in the dK/dV pass) and streams the other side
// through scratch. Thread g, lane v owns rows g + team*r (r < BQ/team) and, of each streamed
// tile, columns v + vector*c; of head_dim, columns v + vector*c of each hd_chunk-wide chunk.
struct GpuAttentionTile {
  static constexpr bool gpu_shaped = true;
  static constexpr int BQ = 64;        // rows a team owns
  static constexpr int BK = 32;        // key rows streamed per step (forward, dQ pass)
  static constexpr int BQS = 16;       // query rows streamed per step (dK/dV pass)
  static constexpr int team = 16;      // threads per team (TeamThreadRange)
  static constexpr int vector = 8;     // lanes per thread (ThreadVectorRange)
  static constexpr int pad_row = 1;    // row stride hd + 1 (odd when hd is a multiple of 8) for K, V, Q, dO
  static constexpr int pad_tile = 8;   // row stride BK + 8 for score tiles: 4 rows x 8 lanes per warp
  static constexpr int hd_chunk = 128; // head_dim columns per sweep (accumulators per lane: rows * 16)
};

// Tensor-core shape (attention_tc_*.hpp): fp32 on CUDA devices of compute capability 8.0 or more,
// every product 3xTF32 on the tensor cores (warp_mma.hpp). A team of `warps` warps, each owning 16
// rows (queries; keys in the dK/dV pass) with its accumulators in registers, streams the other side
// in tiles of BK rows that the team stages in scratch; a warp's probabilities (and dS) stay in its
// registers, the next product's A operand where they are (warp_mma.hpp's c_as_a). head_dim a
// multiple of 8, at most max_hd.
struct TensorCoreTile {
  static constexpr bool gpu_shaped = true;
  static constexpr bool tensor_cores = true;
  static constexpr int warps = 2;
  static constexpr int BQ = 16 * warps;  // rows a team owns
  static constexpr int BK = 32;          // rows of the other side per streamed tile
  static constexpr int max_hd = 128;
};

namespace detail {

// Whether configuration C is the tensor-core shape.
template <class C, class = void>
struct uses_tensor_cores : std::false_type {};
template <class C>
struct uses_tensor_cores<C, std::void_t<decltype(C::tensor_cores)>> : std::bool_constant<C::tensor_cores> {};

// Whether the fused kernels on ExecSpace take the tensor-core shape for fp32 inputs: CUDA built
// for compute capability 8.0 or more (mma.sync with tf32 inputs).
#if defined(KOKKOS_ENABLE_CUDA) &&                                                                         \
    (defined(KOKKOS_ARCH_AMPERE80) || defined(KOKKOS_ARCH_AMPERE86) || defined(KOKKOS_ARCH_ADA89) ||       \
     defined(KOKKOS_ARCH_HOPPER90) || defined(KOKKOS_ARCH_BLACKWELL100) || defined(KOKKOS_ARCH_BLACKWELL120))
template <class ExecSpace>
inline constexpr bool tensor_core_space = std::is_same<ExecSpace, Kokkos::Cuda>::value;
#else
template <class ExecSpace>
inline constexpr bool tensor_core_space = false;
#endif

// Whether the tensor-core shape takes this head_dim.
constexpr bool tensor_core_head_dim(int hd) { return hd > 0 && hd % 8 == 0 && hd <= TensorCoreTile::max_hd; }

// Stands for "the configuration of the execution space" in a defaulted template parameter.
struct AutoTile {};

template <class ExecSpace>
using FusedTile = std::conditional_t<runs_on_host<ExecSpace>, HostAttentionTile, GpuAttentionTile>;

template <class Cfg, class ExecSpace>
using resolve_tile_t = std::conditional_t<std::is_same<Cfg, AutoTile>::value, FusedTile<ExecSpace>, Cfg>;

// What the GPU-shaped kernels assume of a configuration.
template <class C>
constexpr bool valid_gpu_tile() {
  return C::BQ % C::team == 0 && C::BK % C::vector == 0 && C::BQS % C::vector == 0 &&
         C::hd_chunk % C::vector == 0 && (C::vector & (C::vector - 1)) == 0 && C::vector <= 32 &&
         C::team * C::vector <= 1024 && C::pad_row >= 0 && C::pad_tile >= 0;
}

// Level-0 scratch the CUDA backend grants a team: 40 KiB in Kokkos 3.4; in 4.6 the 48 KiB of
// shared memory per block less (1024 + 2) * 8 + 8 bytes kept for team reductions.
constexpr int kLevel0Budget = 48 * 1024 - (1024 + 2) * 8 - 8;

// Floats of team scratch per pass of the GPU-shaped kernels (layouts in attention_gpu_*.hpp).
template <class C>
struct GpuScratch {
  // Rows of K, V, Q, dO tiles: head_dim rounded up to whole lane groups, plus the padding.
  static constexpr int row_ld(int hd) { return (hd + C::vector - 1) / C::vector * C::vector + C::pad_row; }
  // K, then V, of one key tile (BK, hd) | P (BQ, BK) | m, l, rescale (BQ)
  static constexpr int forward(int hd) { return C::BK * row_ld(hd) + C::BQ * (C::BK + C::pad_tile) + 3 * C::BQ; }
  // V, then K, of one key tile (BK, hd) | dP, then dS (BQ, BK)
  static constexpr int dq(int hd) { return C::BK * row_ld(hd) + C::BQ * (C::BK + C::pad_tile); }
  // Q, dO of one query tile (BQS, hd) | P^T, dS^T (BQ, BQS)
  static constexpr int dkv(int hd) { return 2 * C::BQS * row_ld(hd) + 2 * C::BQ * (C::BQS + C::pad_tile); }
  static constexpr int max_bytes(int hd) {
    const int f = forward(hd) > dq(hd) ? forward(hd) : dq(hd);
    return 4 * (f > dkv(hd) ? f : dkv(hd));
  }
};

static_assert(valid_gpu_tile<GpuAttentionTile>(), "GpuAttentionTile breaks the kernels' assumptions");
static_assert(GpuScratch<GpuAttentionTile>::max_bytes(128) <= kLevel0Budget,
              "GpuAttentionTile: head_dim 128 must fit level-0 scratch in every pass");

}  // namespace detail
}  // namespace kformer::kernels
