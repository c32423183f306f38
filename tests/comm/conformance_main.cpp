// The fixture's set-up and the instantiation of every TEST_P of the suite over comm_cases().
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

}  // namespace
