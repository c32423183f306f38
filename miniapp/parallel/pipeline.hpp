// The one executor every schedule runs on: it runs this rank's communication program
// (pipeline_program.hpp), derived from its action list. Each step posts one group of messages:
// the sends of the previous action (or forward-backward pair) with the receives the next one
// needs, waited for before that computes (that wait is the bubble); a group of sends only is left
// to complete while the rank computes on. A slot (one micro-batch's activations on one chunk) is
// freed once its backward has run and its sends have completed. With one stage the list is
// F0 B0 F1 B1 ... and nothing is sent: the same code path trains every layout. Under zb-h1 a
// backward action is B (the input gradient) and a weight action W; the slot lives until W.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "io/data.hpp"
#include "parallel/pipeline_program.hpp"
#include "parallel/schedule.hpp"
#include "model/stage.hpp"

namespace kformer {

struct ActionSpan {  // for the timeline
  Phase phase;
  int micro, chunk;
  double start_us, end_us;
  bool head = false;  // the loss gradient and the head's backward, run at the end of the forward call
};

class Pipeline {
 public:
  // stages: this rank's chunks (global chunk c held at local index c / pp); pp: the pipeline group.
  Pipeline(std::vector<std::unique_ptr<Stage>>& stages, const std::vector<Action>& actions, comm::Communicator* pp);

  // One iteration: micro-batch m holds global samples first_sample + m*micro_batch onward.
  // on_unit_done fires during each chunk's backward of the last micro-batch.
  void run(const DataSource& data, std::int64_t first_sample, int microbatches, float grad_scale,
           const std::function<void(int)>& on_unit_done);

  double wall_ms = 0, compute_ms = 0;  // of the last run: the bubble is 1 - compute / wall
  // Of the last run: time waited for groups of several messages. The trace records a group as
  // non-blocking, so the trainer adds this to the exposed communication time; single messages
  // go out as plain blocking calls, which the trace counts itself.
  double group_wait_ms = 0;
  std::vector<ActionSpan> spans;  // of the last run
  const Program& program() const { return program_; }

 private:
  struct SlotRef {
    Stage* stage;
    int micro;
  };
  Stage& stage_of(int chunk) { return *stages_[chunk / pp_size_]; }
  void exchange(const Step& step);
  void poll(bool wait);
  void release_finished();

  std::vector<std::unique_ptr<Stage>>& stages_;
  comm::Communicator* pp_;
  int pp_size_ = 1;
  Program program_;
  bool split_ = false;  // the actions hold W (zb-h1): a slot is freed after its W
  struct Pending {
    comm::Request request;
    std::vector<SlotRef> sends;  // the slots whose buffers it sends
  };
  std::vector<Pending> pending_;
  std::vector<SlotRef> finished_;  // backward run and last send posted: freed when no send of theirs is pending
};

}  // namespace kformer
