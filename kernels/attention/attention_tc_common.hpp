// What the tensor-core passes of the fused attention (attention_tc_forward.hpp,
// attention_tc_backward.hpp) share: the launch (a team of C::warps warps, one scratch tile per
// warp), the choice of the accumulators' size from head_dim, and row clamping for the loads.
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

}  // namespace kformer::kernels::detail
