// What the tensor-core passes of the fused attention (attention_tc_forward.hpp,
// attention_tc_backward.hpp) share: the launch (a team of C::warps warps and its staged tiles),
// the choice of the accumulators' size from head_dim, and row clamping for the loads.
#pragma once

#include "attention_common.hpp"
#include "attention_tiles.hpp"
#include "warp_mma.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

namespace kformer::kernels::detail {

template <class ExecSpace>
using TcTeam = typename Kokkos::TeamPolicy<ExecSpace>::member_type;

// Throws unless the tensor-core shape takes this layout.
inline void check_tensor_core_layout(const QkvLayout& L) {
  if (!tensor_core_head_dim(L.hd))
    throw std::invalid_argument("attention: the tensor-core shape needs head_dim a multiple of 8 up to " +
                                std::to_string(TensorCoreTile::max_hd) + ", not " + std::to_string(L.hd));
}

// The C fragments (8 columns each) that hold a row of head_dim: 4, 8 or 16, a size known when
// compiling, so that the accumulators are registers.
constexpr int head_tiles_for(int hd) { return hd <= 32 ? 4 : (hd <= 64 ? 8 : 16); }

// body(team, scratch) for each of `league` teams of C::warps warps, `nfloats` of level-0 scratch a
// team. On the host a team has as many threads as there are, up to C::warps, each playing whole
// warps (warp_mma.hpp).
template <class C, class ExecSpace, class Body>
void tc_launch(const char* label, const ExecSpace& exec, int league, int nfloats, const Body& body) {
  using Policy = Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
  const int bytes = static_cast<int>(ScratchFloats<ExecSpace>::shmem_size(nfloats));
  int team_size = C::warps, vector = kWarpLanes;
  if (runs_on_host<ExecSpace>) {
    team_size = exec.concurrency() < team_size ? exec.concurrency() : team_size;
    vector = 1;
  }
  const Policy policy = Policy(exec, league, team_size, vector).set_scratch_size(0, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(const TcTeam<ExecSpace>& team) {
        if (!runs_on_host<ExecSpace> && team.team_size() != C::warps)
          Kokkos::abort("attention: team size is not the tensor-core tile's");
        body(team, ScratchFloats<ExecSpace>(team.team_scratch(0), nfloats).data());
      });
}

// Whether the fused kernels asked for the execution space's own shape (Cfg AutoTile) take the
// tensor-core shape for inputs of element type T, where it takes their head_dim: fp32 on a
// tensor-core space.
template <class Cfg, class ExecSpace, class T>
inline constexpr bool default_tensor_cores = std::is_same<Cfg, AutoTile>::value && tensor_core_space<ExecSpace> &&
                                             std::is_same<std::remove_const_t<T>, float>::value;

// Row r clamped into [0, T): loads past the end of the sequence read a valid row, whose
// contribution the kernels mask.
KOKKOS_INLINE_FUNCTION int clamp_row(int r, int T) { return r < T ? r : T - 1; }

// Row stride of the staged tiles, in floats, so that a warp's fragment loads meet no bank conflict
// either way a tile is read as B. With k along its rows' elements (S = Q K^T's K), lane 4 g + t
// reads row g, element t (+ 4): banks 4 g + t at a stride of 4 modulo 32. With k along its rows, in
// c_order_row's order (P V's V), it reads rows 2 t and 2 t + 1, element g: banks 2 t ld + g, distinct
// for the 32 lanes when 2 ld is 8 or 24 modulo 32, which hd + 4 gives for every head_dim a multiple of 8.
constexpr int tile_ld_rows(int hd) { return hd + 4; }

// Floats of team scratch each pass takes: its two staged tiles (K and V; Q and dO in the dK/dV pass).
template <class C>
constexpr int tc_scratch(int hd) {
  return 2 * C::BK * tile_ld_rows(hd);
}
static_assert(4 * tc_scratch<TensorCoreTile>(TensorCoreTile::max_hd) <= kLevel0Budget,
              "TensorCoreTile: the largest head_dim must fit level-0 scratch");

// Rows [r0, r0 + n) of the hd-wide head at column c of x (B,T,W) (rows clamped into [0, T)) into
// dst (row stride ld) as fp32, by the whole team: consecutive threads read consecutive elements.
template <class Member, class V>
KOKKOS_INLINE_FUNCTION void stage_tile(const Member& team, const V& x, int b, int r0, int n, int T, int c, int hd,
                                       float* dst, int ld) {
  Kokkos::parallel_for(Kokkos::TeamVectorRange(team, n * hd), [&](const int e) {
    const int i = e / hd, d = e - i * hd;
    dst[i * ld + d] = float(x(b, clamp_row(r0 + i, T), c + d));
  });
}

// The team's next pair of streamed tiles: once the previous pair is no longer read, rows [r0, r0 + n)
// of the heads at column c1 of x1 and c2 of x2 into d1 and d2 (row strides ld1, ld2); returns when
// both are written.
template <class Member, class V1, class V2>
KOKKOS_INLINE_FUNCTION void stage_next_tiles(const Member& team, int b, int r0, int n, int T, int hd, const V1& x1,
                                             int c1, float* d1, int ld1, const V2& x2, int c2, float* d2, int ld2) {
  team.team_barrier();
  stage_tile(team, x1, b, r0, n, T, c1, hd, d1, ld1);
  stage_tile(team, x2, b, r0, n, T, c2, hd, d2, ld2);
  team.team_barrier();
}

// The warp's A fragments of 16 rows (from row r0, clamped into [0, T)) of the hd-wide head at column
// c of x, all k-steps of head_dim (NT at most), into its registers `frag` (4 a k-step).
template <class ExecSpace, int NT, int NW, int N, class V>
KOKKOS_INLINE_FUNCTION void load_a_fragments(WarpRegs<ExecSpace, NW, N>& frag, int w, const V& x, int b, int r0,
                                             int T, int c, int used) {
  static_assert(N >= 4 * NT, "load_a_fragments: 4 floats a k-step");
  each_lane<ExecSpace>([&](int l) {
    KFORMER_TC_UNROLL
    for (int ks = 0; ks < NT; ++ks) {
      if (ks < used) {
        KFORMER_TC_UNROLL
        for (int i = 0; i < 4; ++i)
          frag.at(w, l)[4 * ks + i] = float(x(b, clamp_row(r0 + mma_a_row(l, i), T), c + 8 * ks + mma_a_col(l, i)));
      }
    }
  });
}

// Whether a warp keeps its own rows' A operands in registers at NT fragments of head_dim (at most
// 64 wide: 32 floats a lane each), else reads them through the L1 cache at every use.
template <int NT>
inline constexpr bool tc_a_in_registers = NT <= 8;

// load_a_fragments where the warp keeps them (tc_a_in_registers), else nothing.
template <class ExecSpace, int NT, int NW, int N, class V>
KOKKOS_INLINE_FUNCTION void keep_a_fragments(WarpRegs<ExecSpace, NW, N>& frag, int w, const V& x, int b, int r0,
                                             int T, int c, int used) {
  if constexpr (tc_a_in_registers<NT>) load_a_fragments<ExecSpace, NT>(frag, w, x, b, r0, T, c, used);
}

// Element i of lane l's A fragment at k-step ks of the warp's 16 rows from r0 of the head at column
// c of x: from `frag` where keep_a_fragments kept them, else from x.
template <int NT, class ExecSpace, int NW, int N, class V>
KOKKOS_INLINE_FUNCTION float a_fragment(WarpRegs<ExecSpace, NW, N>& frag, int w, int ks, int i, int l, const V& x,
                                        int b, int r0, int T, int c) {
  if constexpr (tc_a_in_registers<NT>)
    return frag.at(w, l)[4 * ks + i];
  else
    return float(x(b, clamp_row(r0 + mma_a_row(l, i), T), c + 8 * ks + mma_a_col(l, i)));
}

}  // namespace kformer::kernels::detail
