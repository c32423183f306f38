// Pipeline schedules as data, proved without running ranks: every schedule for p up to 8 and m up
// to 16 forwards and backwards every (micro-batch, chunk) once, in order, and its messages match
// and never deadlock; broken lists are caught; the shapes are the textbook ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "parallel/schedule.hpp"

using namespace kformer;

namespace {

// Runs each rank's list with every F, B and W taking one time unit (a whole backward, when not
// split, two) and messages taking none; returns the makespan and, per rank, the most
// micro-batches whose activations it held at once (forwarded, and not yet W'd or backwarded).
struct UnitRun {
  int makespan = 0;
  std::vector<int> held;
};
UnitRun unit_time_run(const Schedule& s, int pp) {
  const bool split = std::any_of(s.begin(), s.end(), [](const std::vector<Action>& l) {
    return std::any_of(l.begin(), l.end(), [](const Action& a) { return a.phase == Phase::weight; });
  });
  std::map<std::tuple<int, int, int>, int> done;  // (phase, micro, chunk) -> end time
  std::vector<std::size_t> next(pp, 0);
  std::vector<int> clock(pp, 0), live(pp, 0);
  UnitRun out;
  out.held.assign(pp, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < pp; ++r)
      while (next[r] < s[r].size()) {
        const Action& a = s[r][next[r]];
        int ready = 0;
        if (a.phase != Phase::weight && (a.phase == Phase::forward ? a.chunk > 0 : a.chunk < pp - 1)) {
          const auto it = done.find({int(a.phase), a.micro, a.phase == Phase::forward ? a.chunk - 1 : a.chunk + 1});
          if (it == done.end()) break;
          ready = it->second;
        } else if (a.phase == Phase::backward && a.chunk == pp - 1) {
          ready = done.at({int(Phase::forward), a.micro, a.chunk});
        }
        clock[r] = std::max(clock[r], ready) + (a.phase == Phase::backward && !split ? 2 : 1);
        done[{int(a.phase), a.micro, a.chunk}] = clock[r];
        if (a.phase == Phase::forward) ++live[r];
        if (a.phase == (split ? Phase::weight : Phase::backward)) --live[r];
        out.held[r] = std::max(out.held[r], live[r]);
        ++next[r], progress = true;
      }
  }
  for (int r = 0; r < pp; ++r) out.makespan = std::max(out.makespan, clock[r]);
  return out;
}

}  // namespace

TEST(Schedule, EveryScheduleIsValidUpTo8StagesAnd16MicroBatches) {
  int checked = 0;
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 16; ++m) {
      for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1}) {
        const Schedule s = make_schedule(kind, pp, m, 1);
        EXPECT_EQ(check_schedule(s, pp, m, 1), "") << name_of(kind) << " pp=" << pp << " m=" << m;
        ++checked;
      }
      if (m % pp == 0)
        for (int v = 2; v <= 4; ++v) {
          const Schedule s = make_schedule(ScheduleKind::interleaved, pp, m, v);
          EXPECT_EQ(check_schedule(s, pp, m, v), "") << "interleaved pp=" << pp << " m=" << m << " v=" << v;
          ++checked;
        }
    }
  EXPECT_GT(checked, 300);
}

TEST(Schedule, TheCheckerCatchesBrokenLists) {
  Schedule s = make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1);
  std::swap(s[1][0], s[1][1]);  // rank 1: a backward before its forward, or out of order
  EXPECT_NE(check_schedule(s, 4, 8, 1), "");
  Schedule t = make_schedule(ScheduleKind::gpipe, 2, 2, 1);
  std::swap(t[1][0], t[1][1]);  // rank 1 receives micro-batch 1 first: order mismatch
  EXPECT_NE(check_schedule(t, 2, 2, 1), "");
  Schedule u = make_schedule(ScheduleKind::one_f_one_b, 2, 3, 1);
  u[0].pop_back();  // a backward never runs
  EXPECT_NE(check_schedule(u, 2, 3, 1), "");
  // Both ranks start with a backward that waits on the other: deadlock.
  Schedule d = make_schedule(ScheduleKind::gpipe, 2, 1, 1);
  d[0] = {{Phase::backward, 0, 0}, {Phase::forward, 0, 0}};
  EXPECT_NE(check_schedule(d, 2, 1, 1), "");
}

TEST(Schedule, ShapesAreTheTextbookOnes) {
  // 1F1B on 4 stages, 8 micro-batches: rank 0 warms up with 3 forwards, the last rank with none.
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1);
  EXPECT_EQ(s[0][0], (Action{Phase::forward, 0, 0}));
  EXPECT_EQ(s[0][3], (Action{Phase::forward, 3, 0}));
  EXPECT_EQ(s[0][4], (Action{Phase::backward, 0, 0}));
  EXPECT_EQ(s[3][1], (Action{Phase::backward, 0, 3}));
  // GPipe: all forwards, then all backwards.
  const Schedule g = make_schedule(ScheduleKind::gpipe, 2, 3, 1);
  EXPECT_EQ(g[1][2].phase, Phase::forward);
  EXPECT_EQ(g[1][3].phase, Phase::backward);
  // Interleaved: rank 0 of 2 with 2 chunks runs chunks 0 and 2.
  const Schedule i = make_schedule(ScheduleKind::interleaved, 2, 4, 2);
  EXPECT_EQ(i[0][0].chunk, 0);
  EXPECT_EQ(i[0][2].chunk, 2);
  EXPECT_DOUBLE_EQ(analytic_bubble(4, 8, 1), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(analytic_bubble(4, 8, 2), 3.0 / 19.0);
  EXPECT_THROW(make_schedule(ScheduleKind::interleaved, 4, 6, 2), std::invalid_argument);
}

TEST(Schedule, ZbH1IdlesOnlyWhileTheFirstPassCrossesThePipeline) {
  // With F = B = W (a whole backward 2 units), 1F1B takes 3(m + p - 1) units and ZB-H1 3m + p - 1:
  // the bubble (p-1)/(3m+p-1) of analytic_bubble, against 1F1B's (p-1)/(m+p-1). Its ranks hold
  // no more micro-batches than 1F1B's first rank does, the most any 1F1B rank holds.
  for (int pp = 2; pp <= 8; ++pp)
    for (int m = pp; m <= 16; ++m) {
      const UnitRun one = unit_time_run(make_schedule(ScheduleKind::one_f_one_b, pp, m, 1), pp);
      const UnitRun zb = unit_time_run(make_schedule(ScheduleKind::zb_h1, pp, m, 1), pp);
      EXPECT_EQ(one.makespan, 3 * (m + pp - 1)) << "pp=" << pp << " m=" << m;
      EXPECT_EQ(zb.makespan, 3 * m + pp - 1) << "pp=" << pp << " m=" << m;
      EXPECT_NEAR(1.0 - 3.0 * m / zb.makespan, analytic_bubble(ScheduleKind::zb_h1, pp, m, 1), 1e-12);
      EXPECT_NEAR(1.0 - 3.0 * m / one.makespan, analytic_bubble(ScheduleKind::one_f_one_b, pp, m, 1), 1e-12);
      EXPECT_LE(*std::max_element(zb.held.begin(), zb.held.end()),
                *std::max_element(one.held.begin(), one.held.end()))
          << "pp=" << pp << " m=" << m;
    }
  // The shape: on 4 ranks with 8 micro-batches the last rank runs W0 after B3.
  const Schedule s = make_schedule(ScheduleKind::zb_h1, 4, 8, 1);
  EXPECT_EQ(s[0][4], (Action{Phase::backward, 0, 0}));
  EXPECT_EQ(s[0][5], (Action{Phase::weight, 0, 0}));
  EXPECT_EQ(s[3][7], (Action{Phase::backward, 3, 3}));
  EXPECT_EQ(s[3][8], (Action{Phase::weight, 0, 3}));
  EXPECT_EQ(s[3].back(), (Action{Phase::weight, 7, 3}));
  // A W before its B is caught.
  Schedule bad = s;
  std::swap(bad[0][4], bad[0][5]);
  EXPECT_NE(check_schedule(bad, 4, 8, 1), "");
}

