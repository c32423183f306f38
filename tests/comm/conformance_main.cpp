// The fixture's set-up and the instantiation of every TEST_P of the suite over comm_cases().
#include <string>

#include "conformance.hpp"
#include "test_env.hpp"

namespace kformer::test {

void CommConformance::SetUp() {
  if (GetParam().one_rank_only && runtime().world_size() > 1)
    GTEST_SKIP() << GetParam().name << " runs on one rank only";
  c = GetParam().make();
  rank = c->rank();
  size = c->size();
}

INSTANTIATE_TEST_SUITE_P(Backends, CommConformance, ::testing::ValuesIn(comm_cases()),
                         [](const ::testing::TestParamInfo<CommCase>& info) { return info.param.name; });

}  // namespace kformer::test

namespace {

// ctest starts every rank on this one machine: they all share its node. (The memory check
// without memory.limit_gb divides the node's memory by this count.)
TEST(Runtime, RanksOnNodeCountsTheRanksSharingThisMachine) {
  const auto& rt = kformer::test::runtime();
  EXPECT_EQ(rt.ranks_on_node(), rt.world_size());
}

// On one machine the node-local rank is the world rank (the split keeps world order): it picks
// the GPU of a CUDA build (gpu_choice.hpp).
TEST(Runtime, NodeRankFollowsWorldRankOnOneMachine) {
  const auto& rt = kformer::test::runtime();
  EXPECT_EQ(rt.node_rank(), rt.world_rank());
}

// Start-up verdicts gather every rank's line before the communicator exists: all of them, in
// rank order, lengths differing (rank 0's empty).
TEST(Runtime, AllgatherTextGivesEveryRanksLineInOrder) {
  const auto& rt = kformer::test::runtime();
  const auto line = [](int r) { return r == 0 ? std::string() : "rank " + std::string(std::size_t(r), 'x'); };
  const auto all = rt.allgather_text(line(rt.world_rank()));
  ASSERT_EQ(int(all.size()), rt.world_size());
  for (int r = 0; r < rt.world_size(); ++r) EXPECT_EQ(all[std::size_t(r)], line(r));
}

}  // namespace
