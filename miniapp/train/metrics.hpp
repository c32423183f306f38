// The figures of a run: one record per iteration (what the log line prints), and the summary of
// the JSON report. Pure functions of measured numbers, so they are unit-tested on their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kformer {

struct IterationRecord {
  std::int64_t iteration = 0, total = 0;
  std::int64_t consumed_samples = 0, consumed_tokens = 0;
  double elapsed_s = 0, lr = 0, loss = 0, grad_norm = 0;
  std::int64_t global_batch = 0;
  bool skipped = false;
  std::int64_t skipped_total = 0, nan_total = 0;
  double samples_per_s = 0, tokens_per_s = 0, tflops_per_rank = 0;
  // Time split of this rank (ms) and the per-rank busy times the straggler figures use.
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0, comm_total_ms = 0, comm_exposed_ms = 0;
  double pipeline_wall_ms = 0, pipeline_compute_ms = 0;  // this rank: bubble = 1 - compute / wall
  std::vector<double> rank_bubble;                       // 1 - compute / wall of each rank
  double optimizer_start_us = 0, optimizer_end_us = 0;   // for the timeline
  std::vector<double> rank_busy_ms, rank_comm_ms;
  // Each rank's compute (the pipeline's kernels, what straggler.slowdown stretches) and the wait
  // the straggler added to it as slept (sleep_for: never shorter than (slowdown - 1) times that
  // compute; 0 on every other rank): what a test can hold without timing the machine.
  std::vector<double> rank_compute_ms, rank_stretch_ms;
  int stop_signal = 0, stop_rank = -1;  // a walltime signal any rank got during this iteration
};

// Megatron-DeepSpeed's log line, field by field.
std::string format_log_line(const IterationRecord& r);

// CCL-Bench's straggler figures over per-rank times T_r: slowdown = max/min, delay = (max-min)/max.
struct Straggler {
  double slowdown = 1, delay = 0;
  int slowest_rank = 0;
};
Straggler straggler_of(const std::vector<double>& per_rank_times);

double median(std::vector<double> v);

// The JSON record of one iteration (DESIGN.md's names).
nlohmann::json iteration_json(const IterationRecord& r);

}  // namespace kformer

namespace kformer {

// The "summary" of the JSON report over the recorded iterations (the first is left out as
// warm-up when there are at least three). flops_per_iter: this rank's model FLOPs per iteration.
nlohmann::json summarize(const std::vector<IterationRecord>& records, double flops_per_iter,
                         std::int64_t tokens_per_iter);

}  // namespace kformer
