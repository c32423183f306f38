// The pipeline's communication programs, run on a simulator with NCCL's rules (rendezvous sends,
// one stream per rank in issue order, groups progressing together): for every schedule (zb-h1's
// W actions post nothing), p up to 8, m up to 16 and v up to 4, no rank waits forever and every message lands where it is
// expected, also when every compute communicates itself (tensor parallelism). The old program (a
// lone send after each action, then a blocking receive) deadlocks there, so the simulator can fail.
#include <gtest/gtest.h>

#include "parallel/pipeline_program.hpp"

using namespace kformer;

namespace {

std::vector<Program> programs_of(const Schedule& s, int pp, int v) {
  std::vector<Program> p;
  for (const auto& actions : s) p.push_back(comm_program(actions, pp, pp * v));
  return p;
}

// What Pipeline::run did before: a blocking receive before each action, its send alone after it.
std::vector<Program> lone_send_programs(const Schedule& s, int pp, int v) {
  const int S = pp * v;
  std::vector<Program> programs;
  for (const auto& actions : s) {
    Program p;
    for (const Action& a : actions) {
      const bool fwd = a.phase == Phase::forward;
      Step step;
      if (fwd ? a.chunk > 0 : a.chunk < S - 1)
        step.group = {{false, a.phase, a.micro, a.chunk, (fwd ? a.chunk - 1 : a.chunk + 1) % pp}}, step.wait = true;
      step.action = a;
      p.push_back(step);
      if (fwd ? a.chunk < S - 1 : a.chunk > 0)
        p.push_back({{{true, a.phase, a.micro, a.chunk, (fwd ? a.chunk + 1 : a.chunk - 1) % pp}}, false, std::nullopt});
    }
    programs.push_back(p);
  }
  return programs;
}

// One group per action (the previous action's sends with this one's receive), also interleaved.
std::vector<Program> per_action_programs(const Schedule& s, int pp, int v) {
  const int S = pp * v;
  std::vector<Program> programs;
  for (const auto& actions : s) {
    Program p;
    std::vector<Message> sends;
    for (const Action& a : actions) {
      const bool fwd = a.phase == Phase::forward;
      Step step;
      step.group = sends;
      sends.clear();
      if (fwd ? a.chunk > 0 : a.chunk < S - 1)
        step.group.push_back({false, a.phase, a.micro, a.chunk, (fwd ? a.chunk - 1 : a.chunk + 1) % pp}), step.wait = true;
      step.action = a;
      p.push_back(step);
      if (fwd ? a.chunk < S - 1 : a.chunk > 0) sends.push_back({true, a.phase, a.micro, a.chunk, (fwd ? a.chunk + 1 : a.chunk - 1) % pp});
    }
    if (!sends.empty()) p.push_back({sends, false, std::nullopt});
    programs.push_back(p);
  }
  return programs;
}

}  // namespace

TEST(PipelineProgram, NoScheduleDeadlocksUnderNcclRules) {
  int checked = 0;
  for (int pp = 2; pp <= 8; ++pp)
    for (int m = 1; m <= 16; ++m) {
      std::vector<std::pair<ScheduleKind, int>> runs = {
          {ScheduleKind::gpipe, 1}, {ScheduleKind::one_f_one_b, 1}, {ScheduleKind::zb_h1, 1}};
      if (m % pp == 0)
        for (int v = 1; v <= 4; ++v) runs.push_back({ScheduleKind::interleaved, v});
      for (const auto& run : runs) {
        const int v = run.second;
        const auto programs = programs_of(make_schedule(run.first, pp, m, v), pp, v);
        for (bool tp : {false, true}) {
          EXPECT_EQ(simulate_programs(programs, pp * v, tp), "")
              << name_of(run.first) << " pp=" << pp << " m=" << m << " v=" << v << (tp ? " (computes communicate)" : "");
          ++checked;
        }
      }
    }
  EXPECT_EQ(checked, 880);
}

TEST(PipelineProgram, SendsGoOutWithTheNextReceive) {
  // 1F1B, 2 stages, 4 micro-batches: stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3. F1's activation goes
  // out with the receive of B0's gradient (Megatron's send_forward_recv_backward), waited for.
  const Program p = comm_program(make_schedule(ScheduleKind::one_f_one_b, 2, 4, 1)[0], 2, 2);
  ASSERT_EQ(p.size(), 8u);  // one step per action; chunk 0 sends nothing after its last backward
  EXPECT_TRUE(p[0].group.empty());
  ASSERT_EQ(p[1].group.size(), 1u);  // F0's activation alone: no receive follows, no wait
  EXPECT_TRUE(p[1].group[0].send);
  EXPECT_FALSE(p[1].wait);
  ASSERT_EQ(p[2].group.size(), 2u);
  EXPECT_TRUE(p[2].group[0].send && p[2].group[0].phase == Phase::forward && p[2].group[0].micro == 1);
  EXPECT_TRUE(!p[2].group[1].send && p[2].group[1].phase == Phase::backward && p[2].group[1].micro == 0);
  EXPECT_TRUE(p[2].wait);
  EXPECT_EQ(*p[2].action, (Action{Phase::backward, 0, 0}));
  // The last stage's final gradient goes out in a step of its own, after its last backward.
  const Program q = comm_program(make_schedule(ScheduleKind::one_f_one_b, 2, 4, 1)[1], 2, 2);
  ASSERT_EQ(q.size(), 9u);
  EXPECT_FALSE(q.back().action.has_value());
  ASSERT_EQ(q.back().group.size(), 1u);
  EXPECT_TRUE(q.back().group[0].send && q.back().group[0].micro == 3);
}

TEST(PipelineProgram, InterleavedForwardBackwardPairsExchangeOnce) {
  // Interleaved, 2 stages, 4 micro-batches, 2 chunks each: rank 0 runs F0c0 F1c0 F0c2 F1c2, then
  // the pairs (F2c0 B0c2) (F3c0 B1c2) (F2c2 B0c0) (F3c2 B1c0), then B2c2 B3c2 B2c0 B3c0.
  const Program p = comm_program(make_schedule(ScheduleKind::interleaved, 2, 4, 2)[0], 2, 4);
  ASSERT_EQ(*p[4].action, (Action{Phase::forward, 2, 0}));
  ASSERT_EQ(p[4].group.size(), 2u);  // F1c2's activation out, B0c2's gradient in, before F2c0
  EXPECT_TRUE(p[4].group[0].send && p[4].group[0].micro == 1 && p[4].group[0].chunk == 2);
  EXPECT_TRUE(!p[4].group[1].send && p[4].group[1].phase == Phase::backward && p[4].group[1].micro == 0);
  EXPECT_TRUE(p[4].wait);
  EXPECT_TRUE(p[5].group.empty());  // B0c2 computes on what came before F2c0
  EXPECT_EQ(*p[5].action, (Action{Phase::backward, 0, 2}));
  ASSERT_EQ(p[6].group.size(), 3u);  // the pair's two outputs go out together
  // One group per action deadlocks there: rank 0 sends B0c2's gradient alone, then waits for
  // B1c2's; rank 1 sends B1c3's gradient with its receive of F2c1, before it receives B0c1.
  const std::string verdict = simulate_programs(per_action_programs(make_schedule(ScheduleKind::interleaved, 2, 4, 2), 2, 2), 4, false);
  EXPECT_NE(verdict.find("deadlock"), std::string::npos) << verdict;
  // When the warm-up covers every micro-batch there is no steady state and no pair (Megatron's
  // all_warmup_microbatches): hoisting B0's receive over the last forward would wait on itself.
  const Program q = comm_program(make_schedule(ScheduleKind::interleaved, 3, 3, 2)[0], 3, 6);
  for (const Step& step : q)
    if (step.action && step.action->phase == Phase::forward)
      for (const Message& m : step.group) EXPECT_FALSE(!m.send && m.phase == Phase::backward);
}

TEST(PipelineProgram, TheOldLoneSendsDeadlock1F1B) {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 4, 1);
  const std::string verdict = simulate_programs(lone_send_programs(s, 2, 1), 2, false);
  EXPECT_NE(verdict.find("deadlock"), std::string::npos) << verdict;
  // GPipe has no crossing messages, so even the old program gets through.
  EXPECT_EQ(simulate_programs(lone_send_programs(make_schedule(ScheduleKind::gpipe, 2, 4, 1), 2, 1), 2, false), "");
}

TEST(PipelineProgram, TheSimulatorCatchesBrokenPrograms) {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1);
  // A receive that is not waited for: the backward computes before its gradient arrives.
  auto p = programs_of(s, 2, 1);
  for (auto& step : p[0])
    if (step.action && step.action->phase == Phase::backward) step.wait = false;
  EXPECT_NE(simulate_programs(p, 2, false).find("before its input has arrived"), std::string::npos);
  // Messages swapped on the wire: rank 1 expects F0 first.
  p = programs_of(s, 2, 1);
  std::swap(p[1][0].group[0].micro, p[1][2].group[1].micro);
  EXPECT_NE(simulate_programs(p, 2, false).find("order"), std::string::npos);
  // A send posted before the compute that produces it.
  p = programs_of(s, 2, 1);
  p[0][0].group.push_back({true, Phase::forward, 0, 0, 1});
  p[0][1].group.erase(p[0][1].group.begin());
  EXPECT_NE(simulate_programs(p, 2, false).find("before computing it"), std::string::npos);
  // A message never received: the sender's stream never drains.
  p = programs_of(s, 2, 1);
  p[1][0].group.clear();
  p[1][0].wait = false;
  EXPECT_NE(simulate_programs(p, 2, false), "");
}
