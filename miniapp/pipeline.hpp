// The one executor every schedule runs on: it walks this rank's action list, receives each
// forward's input from the previous chunk and each backward's output gradient from the next one
// (blocking: that wait is the bubble), computes, and sends results on without waiting (the slot
// is freed once its sends have completed). With one stage the list is F0 B0 F1 B1 ...: the same
// code path trains every layout.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "data.hpp"
#include "schedule.hpp"
#include "stage.hpp"

namespace kformer {

struct ActionSpan {  // for the timeline
  Phase phase;
  int micro, chunk;
  double start_us, end_us;
};

class Pipeline {
 public:
  // stages: this rank's chunks (global chunk c held at local index c / pp); pp: the pipeline group.
  Pipeline(std::vector<std::unique_ptr<Stage>>& stages, std::vector<Action> actions, comm::Communicator* pp);

  // One iteration: micro-batch m holds global samples first_sample + m*micro_batch onward.
  // on_unit_done fires during each chunk's backward of the last micro-batch.
  void run(const DataSource& data, std::int64_t first_sample, int microbatches, float grad_scale,
           const std::function<void(int)>& on_unit_done);

  double wall_ms = 0, compute_ms = 0;  // of the last run: the bubble is 1 - compute / wall
  std::vector<ActionSpan> spans;       // of the last run

 private:
  Stage& stage_of(int chunk) { return *stages_[chunk / pp_size_]; }
  void poll_sends(bool wait);

  std::vector<std::unique_ptr<Stage>>& stages_;
  std::vector<Action> actions_;
  comm::Communicator* pp_;
  int pp_size_ = 1, pp_rank_ = 0;
  struct Pending {
    comm::Request request;
    Stage* stage;
    int micro;
    bool release;  // the slot is done with once this send completes
  };
  std::vector<Pending> pending_;
};

}  // namespace kformer
