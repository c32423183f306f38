// When the data-parallel buckets are reduced (predict.grad_reduce): after the backward against
// beside it, and Megatron-Core's delay_grad_reduce, which holds a stage's buckets past the backward
// that frees them (pipeline_sim.hpp), under 1F1B and under interleaving.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "predict/key_costs.hpp"
#include "predict/network_cost.hpp"
#include "predict/pipeline_sim.hpp"
#include "predict/step_sim.hpp"
#include "predict_features_helpers.hpp"

using namespace predict_features;

// The gradient reduction after the backward (predict.grad_reduce=serialized): at dp=8 on a GPU
// profile, whose NCCL reduces buckets while the last backward runs, the step takes longer, by at
// most the reduction's whole time (the fp32 gradients' all-reduce, and a latency per bucket, one
// per unit: the blocks, the embedding and the head), which is all overlapped could have hidden.
TEST(PredictFeatures, AGradientReductionAfterTheBackwardHidesNothing) {
  const auto a100 = profile("perlmutter-a100-40gb");
  const auto step = [&](const char* when) {
    return kp::predict_step(plan("gpt3-small.yaml", {"predict.world=8", "parallel.dp=8", "train.precision=bf16",
                                                     std::string("predict.grad_reduce=") + when}),
                            a100, false)
        .step_ms;
  };
  const double overlapped = step("overlapped"), serialized = step("serialized");
  const kp::NetworkCost net(a100, {});
  const kformer::RunPlan pl = plan("gpt3-small.yaml", {"predict.world=8", "parallel.dp=8"});  // fp32, ZeRO 0
  const double params = pl.memory.params / 4, buckets = pl.settings.model.n_layers + 2;
  const auto ar = kformer::comm::OpKind::allreduce;
  const double reduce_ms = (net.real_us(ar, 4 * params, {8, 1}) + buckets * net.real_us(ar, 0, {8, 1})) / 1e3;
  std::cout << "gpt3-small at dp=8 in bf16: step " << overlapped << " ms with the reduction beside the backward, "
            << serialized << " ms after it (the reduction alone " << reduce_ms << " ms)" << std::endl;
  EXPECT_GT(serialized, overlapped);
  EXPECT_LE(serialized - overlapped, reduce_ms);
}

// Megatron-Core's delay_grad_reduce (predict.grad_reduce=delayed): on 2 stages the last stage runs
// its bucket's pass (predict.bucket_pass, 0.5 ms here) and posts the bucket after its pipeline, its
// last gradient sent first; the first stage as its last backward frees it. Undelayed, the last
// stage's pass sits in its last backward, before the gradient the first stage waits for: the first
// stage's pipeline ends the pass's time later, the last stage's at the same time.
TEST(PredictFeatures, DelayedBucketsWaitForTheStagesPipelineExceptOnTheFirstStage) {
  const auto run = [](bool delay) {
    kp::PipelineSetup s = two_stages(false);
    s.dp = {2, 2}, s.dp_buckets = true, s.delay_buckets = delay;
    for (int c = 0; c < 2; ++c) {
      s.bucket_bytes[c] = {{c, 1e6}};
      s.chunks[c].backward_last = s.chunks[c].backward;
      s.chunks[c].backward_last.push_back({kp::ItemKind::unit_done, "", 500, 0, c});
    }
    return kp::simulate_pipeline(s, kp::NetworkCost(profile("perlmutter-a100-40gb"), {}), false);
  };
  const auto now = run(false), delayed = run(true);
  for (const auto* st : {&now, &delayed})
    for (int r = 0; r < 2; ++r) ASSERT_EQ(st->at(r).buckets.size(), 1u);
  EXPECT_LT(now[1].buckets[0].post_us, now[1].wall_us);          // inside its last backward, before the send
  EXPECT_DOUBLE_EQ(delayed[1].buckets[0].post_us, delayed[1].wall_us);  // after its pipeline and the pass
  EXPECT_NEAR(now[1].wall_us, delayed[1].wall_us, 1e-6);
  EXPECT_NEAR(now[0].wall_us - delayed[0].wall_us, 500, 1e-6);
  EXPECT_DOUBLE_EQ(delayed[0].buckets[0].post_us, delayed[0].wall_us);  // the first stage's last unit ends its pipeline
  EXPECT_NEAR(now[0].busy.back().second - delayed[0].busy.back().second, 500, 1e-6);
}

// Megatron-Core's interleaved schedule with delay_grad_reduce: rank r launches a chunk's buckets
// after its backward step k + r, k the chunk's last micro-batch's step, the rest after its pipeline
// (schedules.py, forward_backward_pipelining_with_interleaving). On 2 ranks of 2 chunks and 2
// micro-batches the backward steps are chunk r + 2 then chunk r, micro-batch 0 then 1: rank 0
// posts chunk 2's bucket (and runs its 0.5 ms pass) right after that chunk's last backward and
// chunk 0's at its end; rank 1 chunk 3's one backward step later, chunk 1's after its pipeline
// (its last send included).
// Undelayed each is posted inside its last backward, before the 1 ms of work after its unit.
TEST(PredictFeatures, InterleavedDelayedBucketsWaitPipelineRankBackwardSteps) {
  const auto run = [](bool delay) {
    kp::PipelineSetup s;
    s.pp = 2, s.n_chunks = 4, s.microbatches = 2;
    const kformer::Schedule sched = kformer::make_schedule(kformer::ScheduleKind::interleaved, 2, 2, 2);
    for (int r = 0; r < 2; ++r) s.programs.push_back(kformer::comm_program(sched[r], 2, 4));
    s.gather_bytes.assign(2, {}), s.bucket_bytes.assign(2, {});
    s.tp = {1, 1}, s.pp_group = {2, 1}, s.dp = {2, 2}, s.message_bytes = 1e6;
    s.dp_buckets = true, s.delay_buckets = delay;
    for (int c = 0; c < 4; ++c) {
      s.bucket_bytes[c % 2][c] = 1e6 + c;
      kp::ChunkWork w;
      w.forward = {{kp::ItemKind::compute, "f", 1000, 0, c}};
      w.backward = {{kp::ItemKind::compute, "b", 2000, 0, c}};
      w.backward_last = {{kp::ItemKind::compute, "b", 1000, 0, c}, {kp::ItemKind::unit_done, "", 500, 0, c},
                         {kp::ItemKind::compute, "b", 1000, 0, c}};
      s.chunks.push_back(w);
    }
    return kp::simulate_pipeline(s, kp::NetworkCost(profile("perlmutter-a100-40gb"), {}), true);
  };
  const auto now = run(false), delayed = run(true);
  // when rank r posted chunk c's bucket, and when its backward of (micro, chunk) ended
  const auto posted = [](const kp::StageTimeline& st, int c) {
    for (const auto& b : st.buckets)
      if (b.bytes == 1e6 + c) return b.post_us;
    return -1.0;
  };
  const auto ended = [](const kp::StageTimeline& st, int micro, int c) {
    for (const auto& sp : st.spans)
      if (!sp.comm && sp.name == "backward" && sp.micro == micro && sp.chunk == c) return sp.end_us;
    return -1.0;
  };
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(now[r].buckets.size(), 2u);
    ASSERT_EQ(delayed[r].buckets.size(), 2u);
    for (int c = r; c < 4; c += 2) EXPECT_NEAR(posted(now[r], c), ended(now[r], 1, c) - 1000, 1e-6) << r << c;
  }
  EXPECT_NEAR(posted(delayed[0], 2), ended(delayed[0], 1, 2) + 500, 1e-6);
  EXPECT_NEAR(posted(delayed[0], 0), ended(delayed[0], 1, 0) + 500, 1e-6);
  EXPECT_NEAR(posted(delayed[1], 3), ended(delayed[1], 0, 1) + 500, 1e-6);  // the step after chunk 3's last
  EXPECT_DOUBLE_EQ(posted(delayed[1], 1), delayed[1].wall_us);
  EXPECT_GE(delayed[1].wall_us, ended(delayed[1], 1, 1) + 500 - 1e-6);  // after its last send too
}

// On a deck: delayed moves the bucket passes out of the backward under 1F1B and under interleaving.
TEST(PredictFeatures, DelayedBucketsChangeTheStepUnderBothSchedules) {
  const auto a100 = profile("perlmutter-a100-40gb");
  const auto step = [&](const std::string& when, bool interleaved) {
    std::vector<std::string> o = {kSource + "/input/tiny.yaml", "predict.world=4", "parallel.pp=2", "parallel.dp=2",
                                  "train.global_batch=16", "train.micro_batch=1", "predict.bucket_pass=nan_check_scale",
                                  "predict.grad_reduce=" + when};
    if (interleaved) o.insert(o.end(), {"parallel.schedule=interleaved", "parallel.virtual_stages=2"});
    return kp::predicted_step_ms(kformer::read_prediction_deck("predict", o, false).settings, a100);
  };
  EXPECT_NE(step("delayed", false), step("overlapped", false));
  EXPECT_NE(step("delayed", true), step("overlapped", true));
}
