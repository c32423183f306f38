// The rank mesh on the real world communicator: for every (dp, pp, tp) that fits the job, each
// axis communicator holds exactly the ranks of its group, in the group's order (TP fastest,
// then DP, then PP), and the group lists computed without communication agree.
#include <gtest/gtest.h>

#include <numeric>

#include <Kokkos_Core.hpp>

#include "comm/device_view.hpp"
#include "comm/mesh.hpp"
#include "comm/runtime.hpp"
#include "test_env.hpp"

using namespace kformer::comm;

namespace {

using kformer::test::world;

// Members of `axis` as world ranks, in the axis communicator's own rank order.
std::vector<int> members(Communicator& axis, int world_rank) {
  // In the execution space's memory, as NCCL (and comm.strict) require.
  const auto slot = device_view<Kokkos::View<int*, Kokkos::DefaultExecutionSpace::memory_space>>("slot", axis.size());
  Kokkos::deep_copy(Kokkos::subview(slot, axis.rank()), world_rank);
  axis.allreduce(slot.data(), slot.data(), slot.size(), DType::i32, ReduceOp::sum);
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), slot);
  return std::vector<int>(host.data(), host.data() + host.size());
}

}  // namespace

TEST(Mesh, EveryLayoutThatFitsTheJob) {
  auto w = world();
  const int n = w->size();
  int checked = 0;
  for (int tp = 1; tp <= n; ++tp)
    for (int pp = 1; pp <= n; ++pp) {
      if (n % (tp * pp)) continue;
      const MeshShape s{n / (tp * pp), pp, tp};
      Mesh m = build_mesh(*w, s);
      EXPECT_EQ(m.tp->size(), tp);
      EXPECT_EQ(m.dp->size(), s.dp);
      EXPECT_EQ(m.pp->size(), pp);
      EXPECT_EQ(m.world_rank, (m.pp_rank * s.dp + m.dp_rank) * tp + m.tp_rank);
      EXPECT_EQ(m.tp->rank(), m.tp_rank);
      EXPECT_EQ(m.dp->rank(), m.dp_rank);
      EXPECT_EQ(m.pp->rank(), m.pp_rank);
      const auto g = mesh_groups(s);
      EXPECT_EQ(members(*m.tp, w->rank()), g.tp[m.pp_rank * s.dp + m.dp_rank]);
      EXPECT_EQ(members(*m.dp, w->rank()), g.dp[m.pp_rank * tp + m.tp_rank]);
      EXPECT_EQ(members(*m.pp, w->rank()), g.pp[m.dp_rank * tp + m.tp_rank]);
      ++checked;
    }
  EXPECT_GE(checked, 1);
}

TEST(Mesh, GroupsAsMegatronOrdersThem) {
  const auto g = mesh_groups({2, 1, 2});
  EXPECT_EQ(format_groups(g.tp), "[[0,1],[2,3]]");
  EXPECT_EQ(format_groups(g.dp), "[[0,2],[1,3]]");
  EXPECT_EQ(format_groups(g.pp), "[[0],[1],[2],[3]]");
  const auto h = mesh_groups({2, 2, 2});
  EXPECT_EQ(format_groups(h.tp), "[[0,1],[2,3],[4,5],[6,7]]");
  EXPECT_EQ(format_groups(h.dp), "[[0,2],[1,3],[4,6],[5,7]]");
  EXPECT_EQ(format_groups(h.pp), "[[0,4],[1,5],[2,6],[3,7]]");
}

TEST(Mesh, ShapeThatDoesNotFitIsRefusedWithTheFix) {
  auto w = world();
  try {
    build_mesh(*w, {w->size() + 1, 1, 1});
    FAIL() << "an oversized mesh was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("launch that many ranks"), std::string::npos) << e.what();
  }
}
