// predict.pipeline_messages: DeepSpeed's pipeline engine partitions a stage's output over TP when
// it sends it, gathers it back before the backward, and before 0.5.4 sent the gradients whole.
// Checked on the described chunks (the extra gather) and on a hand-built pipeline (the larger
// gradient message). Part of test_predict_features.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "predict/software_programs.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;

namespace {

using kformer::comm::OpKind;
using kformer::comm::Payload;

// The TP all-gathers of a pipeline message in a list, with their bytes.
std::vector<double> message_gathers(const std::vector<kp::WorkItem>& items) {
  std::vector<double> out;
  for (const auto& i : of_kind(items, kp::ItemKind::tp_comm))
    if (i.op == OpKind::allgather && i.payload == Payload::message) out.push_back(i.bytes);
  return out;
}

// The pipeline's end on hand-built stages (forwards of 1 ms, backwards of 2 ms, an activation of
// `activation` bytes and its gradient of `gradient` (0: the same), sends at `gbps` and nothing else
// on the network) with each rank's program grouped (kformer's) or one call a step (DeepSpeed's order).
// With v chunks a rank (interleaved), and `calls`: kformer's grouped program, DeepSpeed's one call a
// step, or Megatron-Core's prefetched receives.
enum class Calls { grouped, one_by_one, prefetched };
double pipeline_wall_us(kformer::ScheduleKind kind, int pp, int m, Calls calls, double gbps, double activation = 1e6,
                        double gradient = 0, int v = 1) {
  kp::MachineProfile p = slow_sends();
  p.intra_node.collectives["send"] = {{0, gbps, 0}};
  p.inter_node = p.intra_node;
  kp::PipelineSetup s;
  s.pp = pp, s.n_chunks = pp * v, s.microbatches = m;
  const kformer::Schedule sched = kformer::make_schedule(kind, pp, m, v);
  for (int r = 0; r < pp; ++r) {
    s.programs.push_back(kformer::comm_program(sched[r], pp, pp * v));
    if (calls == Calls::one_by_one) s.programs.back() = kp::one_call_a_step(s.programs.back(), r, pp);
    if (calls == Calls::prefetched) s.programs.back() = kp::prefetched_program(s.programs.back());
  }
  s.prefetch_receives = calls == Calls::prefetched;
  s.gather_bytes.assign(pp, {}), s.bucket_bytes.assign(pp, {});
  s.tp = {1, 1}, s.pp_group = {pp, 1};
  s.message_bytes = activation, s.grad_message_bytes = gradient;
  for (int c = 0; c < pp * v; ++c) {
    kp::ChunkWork w;
    w.forward = {{kp::ItemKind::compute, "f", 1000, 0, 0}};
    w.backward = {{kp::ItemKind::compute, "b", 2000, 0, 0}};
    s.chunks.push_back(w);
  }
  double wall = 0;
  for (const auto& st : kp::simulate_pipeline(s, kp::NetworkCost(p, {}), false)) wall = std::max(wall, st.wall_us);
  return wall;
}

}  // namespace

// A middle chunk at TP 2 (tiny.yaml on 4 stages) receives its input and its output's gradient as
// 1/tp parts and gathers each (split, kformer's). Partitioned (DeepSpeed from 0.5.4), its backward
// also gathers its own output back, the same bytes, before the gradient's gather; with the
// gradients whole (before 0.5.4) the one gather left is that output's. The forward is untouched,
// and the last chunk, which sends no output and receives no gradient, has none either way.
TEST(PredictMessages, DeepSpeedGathersAStagesOutputBackBeforeItsBackward) {
  const auto split = middle_chunk("predict.pipeline_messages=split");
  const auto part = middle_chunk("predict.pipeline_messages=partitioned");
  const auto whole = middle_chunk("predict.pipeline_messages=partitioned_whole_grads");
  const std::vector<double> one = message_gathers(split.backward);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_GT(one[0], 0);
  EXPECT_EQ(message_gathers(part.backward), std::vector<double>(2, one[0]));
  EXPECT_EQ(message_gathers(whole.backward), one);
  EXPECT_EQ(message_gathers(part.backward_last), message_gathers(part.backward));
  for (const auto* w : {&part, &whole}) EXPECT_EQ(message_gathers(w->forward), message_gathers(split.forward));
  EXPECT_EQ(message_gathers(split.forward).size(), 1u);  // the input's

  const kformer::RunPlan pl = plan("tiny.yaml", {"predict.world=8", "parallel.pp=4", "parallel.tp=2",
                                                 "predict.pipeline_messages=partitioned"});
  EXPECT_TRUE(message_gathers(kp::chunk_work(profile("perlmutter-a100-40gb"), pl, 3).backward).empty());
}

// A gradient sent whole travels tp times the bytes of a split one: on two stages with one
// micro-batch each send is on the critical path, so the pipeline ends later by exactly the larger
// message's extra time at the send bandwidth (3e6 bytes at 8 Gbit/s: 3 ms), and an activation of
// the same size as the gradient costs the same as leaving the gradient's size unset.
TEST(PredictMessages, AWholeGradientCostsItsExtraBytesOnTheCriticalPath) {
  const auto wall = [](double gradient) {
    return pipeline_wall_us(kformer::ScheduleKind::one_f_one_b, 2, 1, Calls::grouped, 8, 1e6, gradient);
  };
  const double split = wall(0), same = wall(1e6), whole = wall(4e6);
  EXPECT_DOUBLE_EQ(same, split);
  EXPECT_NEAR(whole - split, 3e6 * 8 / 8e9 * 1e6, 1e-6);
  // 1 + 2 ms of compute on each stage plus both sends (1 ms and 4 ms at 8 Gbit/s), wake-ups aside
  EXPECT_GE(whole, 2 * 3000 + 1000 + 4000);
}

// DeepSpeed's blocking calls one by one (predict.pipeline_calls=one_by_one): on 1F1B, DeepSpeed's
// one schedule, they never wait on each other in a cycle (every program finishes, on 2-8 stages
// and 1-16 micro-batches), cost nothing when messages are free (the same makespan as the grouped program:
// the schedule is the same, only the calls differ), and with messages of 1 ms (1 MB at 8 Gbit/s)
// cost more than the grouped exchange, whose sends and receive run together, but less than
// twice the grouped program's whole communication. A program's message count is unchanged.
TEST(PredictMessages, OneCallAStepFinishesAndCostsOnlyWhenMessagesDo) {
  using kformer::ScheduleKind;
  for (ScheduleKind kind : {ScheduleKind::one_f_one_b})
    for (int pp = 2; pp <= 8; ++pp)
      for (int m = 1; m <= 16; ++m) {
        const double free_grouped = pipeline_wall_us(kind, pp, m, Calls::grouped, 0),
                     free_one = pipeline_wall_us(kind, pp, m, Calls::one_by_one, 0);
        EXPECT_NEAR(free_one, free_grouped, 1e-6) << int(kind) << " pp " << pp << " m " << m;
        const double grouped = pipeline_wall_us(kind, pp, m, Calls::grouped, 8),
                     one = pipeline_wall_us(kind, pp, m, Calls::one_by_one, 8);
        EXPECT_GE(one, grouped - 1e-6) << int(kind) << " pp " << pp << " m " << m;
        EXPECT_LE(one - free_one, 2 * (grouped - free_grouped) + 1e-6) << int(kind) << " pp " << pp << " m " << m;
      }
  const auto program = kformer::comm_program(kformer::make_schedule(ScheduleKind::one_f_one_b, 4, 8, 1)[1], 4, 4);
  std::size_t messages = 0, one_messages = 0;
  for (const auto& step : program) messages += step.group.size();
  for (const auto& step : kp::one_call_a_step(program, 1, 4)) {
    EXPECT_LE(step.group.size(), 1u);
    EXPECT_EQ(step.wait, step.group.size() == 1);
    one_messages += step.group.size();
  }
  EXPECT_EQ(one_messages, messages);
  // 1F1B's steady state: after a forward the gradient's receive goes before the activation's send
  EXPECT_GT(pipeline_wall_us(ScheduleKind::one_f_one_b, 4, 8, Calls::one_by_one, 8),
            pipeline_wall_us(ScheduleKind::one_f_one_b, 4, 8, Calls::grouped, 8));
}

// Megatron-Core's non-blocking sends and receives under interleaving (predict.pipeline_p2p=
// prefetched): the program has the grouped one's actions and messages, no step waits, and each
// receive is posted as the rank's previous action of its phase ends. Every program finishes (2-4
// stages of 2 chunks, 2-8 micro-batches, and 1F1B), with free messages takes 1F1B's time and no
// more than the grouped program's under interleaving (whose forward waits for the gradient the
// backward after it reads: 3 stages of 3 micro-batches, 27 against 24 ms), and with
// messages of 1 ms never ends later than the grouped exchange, whose receives are posted only as
// the action before ends: on 4 stages of 2 chunks and 8 micro-batches it ends earlier.
TEST(PredictMessages, PrefetchedReceivesFinishAndRunBesideTheActionBefore) {
  using kformer::ScheduleKind;
  for (int pp = 2; pp <= 4; ++pp)
    for (int m = pp; m <= 8; m += pp)
      for (const auto& [kind, v] : {std::make_pair(ScheduleKind::interleaved, 2), std::make_pair(ScheduleKind::one_f_one_b, 1)}) {
        const double free_grouped = pipeline_wall_us(kind, pp, m, Calls::grouped, 0, 1e6, 0, v),
                     free_prefetched = pipeline_wall_us(kind, pp, m, Calls::prefetched, 0, 1e6, 0, v);
        if (v == 1) EXPECT_NEAR(free_prefetched, free_grouped, 1e-6) << pp << m << v;
        else EXPECT_LE(free_prefetched, free_grouped + 1e-6) << pp << m << v;
        EXPECT_LE(pipeline_wall_us(kind, pp, m, Calls::prefetched, 8, 1e6, 0, v),
                  pipeline_wall_us(kind, pp, m, Calls::grouped, 8, 1e6, 0, v) + 1e-6) << pp << m << v;
      }
  const double pre = pipeline_wall_us(ScheduleKind::interleaved, 4, 8, Calls::prefetched, 8, 1e6, 0, 2),
               grp = pipeline_wall_us(ScheduleKind::interleaved, 4, 8, Calls::grouped, 8, 1e6, 0, 2);
  std::cout << "4 stages of 2 chunks, 8 micro-batches, 1 ms messages: " << grp / 1e3 << " ms grouped, " << pre / 1e3
            << " ms prefetched" << std::endl;
  EXPECT_LT(pre, grp - 1000);

  const auto actions = kformer::make_schedule(ScheduleKind::interleaved, 4, 8, 2)[1];
  const auto grouped = kformer::comm_program(actions, 4, 8), prefetched = kp::prefetched_program(grouped);
  std::size_t messages = 0, prefetched_messages = 0;
  for (const auto& step : grouped) messages += step.group.size();
  std::vector<kformer::Action> order;
  for (const auto& step : prefetched) {
    EXPECT_FALSE(step.wait);
    prefetched_messages += step.group.size();
    for (const auto& msg : step.group) {
      if (msg.send) continue;  // a receive: posted after the last action of its reader's phase so far
      const auto last = std::find_if(order.rbegin(), order.rend(), [&](const auto& a) { return a.phase == msg.phase; });
      const auto reader = std::find_if(actions.begin(), actions.end(), [&](const auto& a) {
        return a.phase == msg.phase && a.micro == msg.micro && a.chunk == msg.chunk;
      });
      ASSERT_NE(reader, actions.end());
      const std::size_t next = order.size();  // the action this step runs
      if (last != order.rend()) {
        const auto same = std::find_if(actions.begin() + std::ptrdiff_t(next), actions.end(),
                                       [&](const auto& a) { return a.phase == msg.phase; });
        EXPECT_EQ(&*same, &*reader) << "the receive of the rank's next action of its phase";
      } else {
        EXPECT_EQ(std::size_t(reader - actions.begin()), next);  // the first of its phase: just before it
      }
    }
    if (step.action) order.push_back(*step.action);
  }
  EXPECT_EQ(prefetched_messages, messages);
  EXPECT_EQ(order.size(), actions.size());
}
