// The timed simulation of one iteration's pipeline on every pipeline rank of one (dp, tp)
// column: each rank runs the communication program that Pipeline::run executes
// (comm_program() over the schedule make_schedule() gives the trainer), a step posting its group
// of messages at the rank's clock, waiting for it where the step says so, then computing its
// action as the chunk's work list (chunk_work.hpp): kernels at the profile's cost, TP all-reduces
// and ZeRO-3 gathers (kept in a pool of gathered units as ParamStore keeps them) as blocking calls,
// or the gathers one unit ahead on a stream of their own (gather_prefetch). Compute beside a
// collective in flight (a prefetched gather beside the unit before its own; an asynchronous
// input-gradient collective beside its GEMM) runs on the SMs the collective leaves
// (NetworkCost::compute_share_lost).
// A message completes once both ends have posted it, after the machine's point-to-point time,
// and never before its group's emulated time from the post. The data-parallel buckets the last
// micro-batch's backward posts are returned with their post times; step_sim.hpp finishes them.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "predict/chunk_work.hpp"
#include "predict/network_cost.hpp"
#include "parallel/pipeline_program.hpp"

namespace kformer::predict {

struct SimSpan {  // one event of the simulated trace
  std::string name;
  bool comm = false;  // else compute
  double start_us = 0, end_us = 0;
  int micro = -1, chunk = -1;
  double bytes = 0;
  bool head = false;  // the loss and the head's backward, at the end of the last chunk's forward
};

struct BucketPost {
  double post_us = 0, bytes = 0;
};

// What compute beside a collective loses to the SMs the collective holds (network.collective_sms).
inline const std::string kSlowedBesideCollectives = "slowed_beside_collectives";

struct StageTimeline {
  double start_us = 0;                        // the pipeline's start: the end of the step's prepare phase
  double wall_us = 0;                         // the pipeline's end
  double forward_us = 0, backward_us = 0;     // the stage's timers (TP calls and gathers inside)
  double exposed_us = 0;                      // time blocked in calls and group waits
  std::vector<std::pair<double, double>> comm;  // intervals with a call in flight
  std::vector<std::pair<double, double>> busy;  // intervals of compute (kernels at the profile's cost)
  // The compute in `busy` by what it is: a kernel family (kformer's, kernels/call_record.hpp), or a
  // pass the costed software adds (bucket_pass, eager_host, ...), or kSlowedBesideCollectives
  std::map<std::string, double> kernel_us;
  std::vector<BucketPost> buckets;            // DP reductions, in posting order
  std::vector<SimSpan> spans;                 // when recorded
};

struct PipelineSetup {
  int pp = 1, n_chunks = 1, microbatches = 1;
  std::vector<Program> programs;        // [pipeline rank]
  // [pipeline rank] when its pipeline begins: after the kernels of the step's prepare phase
  // (StepProgram::prepare: gradients zeroed, bf16 weight copies refreshed); empty: all at 0
  std::vector<double> start_us;
  std::vector<ChunkWork> chunks;        // [global chunk]
  // [pipeline rank] layer -> bytes (nccl-tests' size) of its unit's ZeRO-3 gather and of its
  // data-parallel bucket, as the rank's described calls make them (step_sim.cpp)
  std::vector<std::map<int, double>> gather_bytes, bucket_bytes;
  double message_bytes = 0;             // an activation or its gradient (rows, C) as it travels
  double grad_message_bytes = 0;        // a gradient where it travels otherwise (predict.pipeline_messages); 0: as above
  bool fsdp = false;                    // ZeRO-3 over dp > 1: gathers before use
  bool dp_buckets = false;              // dp > 1: buckets are posted
  bool fsdp_grads = false;              // ZeRO-3 shards gradients: its reduce-scatters (grad_scatter) are the buckets
  // Megatron-Core's delay_grad_reduce (predict.grad_reduce=delayed): a rank holds its buckets (and
  // their passes) past the backward that frees them. With one chunk a rank (1F1B) every rank but the
  // first posts them after its pipeline; interleaved, rank r posts a chunk's r backward steps after
  // the chunk's last backward, or after its pipeline where it has no such step.
  bool delay_buckets = false;
  GroupShape tp, dp, pp_group;
  std::size_t gather_pool = 3;          // ParamStore's pool of gathered units
  // A unit's gather runs on a stream of its own, issued as the unit before it begins (FSDP's
  // prefetch: predict.zero3_gather=overlapped); false: a blocking call at the unit's require.
  bool gather_prefetch = false;
  bool one_stream = false;              // a rank's calls run in order on one stream (NCCL): see blocking()
  bool serial_p2p = false;              // an action starts after the rank's sends in flight (predict.pipeline_p2p)
  // Each receive a call of its own, waited for as the action that reads it begins (the programs from
  // prefetched_program, software_programs.hpp: predict.pipeline_p2p=prefetched).
  bool prefetch_receives = false;
  // A TP all-gather runs beside the GEMM after it, a reduce-scatter beside the GEMM before it: only
  // what outlasts the GEMM is exposed (predict.tp_comm=overlapped, Megatron-Core's --tp-comm-overlap).
  bool tp_overlap = false;
  // A column-parallel layer's input-gradient collective runs beside the weight-gradient half of the
  // backward GEMM before it, and under sequence parallelism its input's all-gather for the weight
  // gradient beside the input-gradient half of the one after it (predict.tp_input_grad=overlapped,
  // Megatron-LM's asynchronous TP communication in the backward).
  bool tp_input_grad = false;
};

std::vector<StageTimeline> simulate_pipeline(const PipelineSetup& s, const NetworkCost& net, bool record);

// Total length of the union of intervals.
double union_us(std::vector<std::pair<double, double>> intervals);
// Length of the time covered by both unions.
double overlap_us(std::vector<std::pair<double, double>> a, std::vector<std::pair<double, double>> b);

}  // namespace kformer::predict
