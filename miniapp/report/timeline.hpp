// The timeline (output.trace=DIR): Chrome trace-event JSON that Perfetto and chrome://tracing
// open. Each rank writes DIR/rank<r>.json with its forward and backward spans (micro-batch and
// chunk in the args), its communication calls (from the tracing communicator) and its optimizer
// step; rank 0 then merges them into DIR/trace.json, one process row per rank, so the pipeline's
// shape is visible at a glance.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.hpp"
#include "comm/trace_log.hpp"
#include "parallel/pipeline.hpp"

namespace kformer {

class Timeline {
 public:
  Timeline(std::string dir, int rank);
  // One iteration's events (call before the trace log is cleared for the next one).
  void add_iteration(int iteration, const std::vector<ActionSpan>& spans, const comm::TraceLog& comm,
                     double optimizer_start_us, double optimizer_end_us);
  // Writes this rank's file, then rank 0 merges all of them (collective over `world`).
  void write(comm::Communicator& world);

 private:
  std::string dir_;
  int rank_;
  nlohmann::json events_ = nlohmann::json::array();
};

}  // namespace kformer
