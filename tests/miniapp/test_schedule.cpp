// Pipeline schedules as data, proved without running ranks: every schedule for p up to 8 and m up
// to 16 forwards and backwards every (micro-batch, chunk) once, in order, and its messages match
// and never deadlock; broken lists are caught; the shapes are the textbook ones.
#include <gtest/gtest.h>

#include "schedule.hpp"

using namespace kformer;

TEST(Schedule, EveryScheduleIsValidUpTo8StagesAnd16MicroBatches) {
  int checked = 0;
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 16; ++m) {
      for (const char* kind : {"gpipe", "1f1b"}) {
        const Schedule s = make_schedule(kind, pp, m, 1);
        EXPECT_EQ(check_schedule(s, pp, m, 1), "") << kind << " pp=" << pp << " m=" << m;
        ++checked;
      }
      if (m % pp == 0)
        for (int v = 2; v <= 4; ++v) {
          const Schedule s = make_schedule("interleaved", pp, m, v);
          EXPECT_EQ(check_schedule(s, pp, m, v), "") << "interleaved pp=" << pp << " m=" << m << " v=" << v;
          ++checked;
        }
    }
  EXPECT_GT(checked, 300);
}

TEST(Schedule, TheCheckerCatchesBrokenLists) {
  Schedule s = make_schedule("1f1b", 4, 8, 1);
  std::swap(s[1][0], s[1][1]);  // rank 1: a backward before its forward, or out of order
  EXPECT_NE(check_schedule(s, 4, 8, 1), "");
  Schedule t = make_schedule("gpipe", 2, 2, 1);
  std::swap(t[1][0], t[1][1]);  // rank 1 receives micro-batch 1 first: order mismatch
  EXPECT_NE(check_schedule(t, 2, 2, 1), "");
  Schedule u = make_schedule("1f1b", 2, 3, 1);
  u[0].pop_back();  // a backward never runs
  EXPECT_NE(check_schedule(u, 2, 3, 1), "");
  // Both ranks start with a backward that waits on the other: deadlock.
  Schedule d = make_schedule("gpipe", 2, 1, 1);
  d[0] = {{Phase::backward, 0, 0}, {Phase::forward, 0, 0}};
  EXPECT_NE(check_schedule(d, 2, 1, 1), "");
}

TEST(Schedule, ShapesAreTheTextbookOnes) {
  // 1F1B on 4 stages, 8 micro-batches: rank 0 warms up with 3 forwards, the last rank with none.
  const Schedule s = make_schedule("1f1b", 4, 8, 1);
  EXPECT_EQ(s[0][0], (Action{Phase::forward, 0, 0}));
  EXPECT_EQ(s[0][3], (Action{Phase::forward, 3, 0}));
  EXPECT_EQ(s[0][4], (Action{Phase::backward, 0, 0}));
  EXPECT_EQ(s[3][1], (Action{Phase::backward, 0, 3}));
  // GPipe: all forwards, then all backwards.
  const Schedule g = make_schedule("gpipe", 2, 3, 1);
  EXPECT_EQ(g[1][2].phase, Phase::forward);
  EXPECT_EQ(g[1][3].phase, Phase::backward);
  // Interleaved: rank 0 of 2 with 2 chunks runs chunks 0 and 2.
  const Schedule i = make_schedule("interleaved", 2, 4, 2);
  EXPECT_EQ(i[0][0].chunk, 0);
  EXPECT_EQ(i[0][2].chunk, 2);
  EXPECT_DOUBLE_EQ(analytic_bubble(4, 8, 1), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(analytic_bubble(4, 8, 2), 3.0 / 19.0);
  EXPECT_THROW(make_schedule("interleaved", 4, 6, 2), std::invalid_argument);
}
