// The step's work described once, by the code the trainer runs. A rank's model is built from the
// plan as the trainer builds it (rank_model.hpp), over groups that only record
// (comm/described_comm.hpp), and run under a Describing scope (kernels/call_record.hpp): its
// buffers hold no memory, its kernels record their call instead of launching, its communication
// calls record their group, type and bytes. What comes out, in order, is the list of kernel calls
// (with shapes, element types, bytes and FLOPs), communication calls, phase regions and model
// events (ZeRO-3's "require", a unit's gradients done) of one whole iteration, or of one chunk's
// forward and backward: predict costs the chunks (predict/chunk_work.hpp) and the phases after
// the pipeline (predict/step_sim.hpp), and the work-list test holds both against what a run's
// Kokkos Tools callbacks and communicator see.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "call_record.hpp"
#include "comm/communicator.hpp"
#include "plan/run_plan.hpp"
#include "train/rank_model.hpp"

namespace kformer {

struct WorkEntry {
  enum class Kind { kernel, comm, region_begin, region_end, require, unit_done };
  Kind kind = Kind::kernel;
  kernels::KernelCall call;                // kernel
  comm::OpKind op = comm::OpKind::allreduce;  // comm
  comm::DType type = comm::DType::f32;
  double bytes = 0;                        // comm: nccl-tests' size (comm::op_bytes)
  comm::Payload payload = comm::Payload::other;  // comm: what it carries (its call site says)
  std::string group;                       // comm: "tp", "dp", "pp"; region: its name
  int group_size = 1;
  int layer = 0;                           // require, unit_done: the unit (-1 embedding, L final norm and head)
};

class WorkLog : public kernels::CallSink {
 public:
  std::vector<WorkEntry> entries;
  void kernel(const kernels::KernelCall& call) override;
  void region(const char* name, bool begin) override;
  void mark(const char* what, int layer) override;
  virtual void comm(const comm::Op& op, const std::string& group, int size);
  virtual void unit_done(int layer);
};

// One iteration of the rank at `at`, as Trainer::iterate runs it: every phase of the step program
// (step_program.hpp), each inside its region: prepare, the pipeline (micro-batch forwards and
// backwards in the schedule's order, the messages between stages, each unit's buckets posted in
// the region kformer::unit_done on the last micro-batch), grad_sync, grad_norm, optimizer, metrics.
WorkLog describe_iteration(const RunPlan& plan, RankPlace at);

// The phases of the rank at `at` around its pipeline, described without the pipeline itself
// (predict simulates that one chunk call at a time): `before` (prepare: the gradients and the
// step's scalars zeroed, the bf16 weight copies refreshed), and `after` (grad_sync, grad_norm,
// optimizer, metrics) as they run once the last micro-batch's backward has handed every unit of
// the rank to the buckets (the buckets' posts are not in the list: the simulator places them
// during the backward).
struct PhaseLogs {
  WorkLog before, after;
  // The bytes (nccl-tests' size) of the data-parallel calls each unit's done hook posts, by the
  // unit's layer: the buckets the simulator places during the last backward. Empty where there
  // are none (dp = 1, or ZeRO-3's sharded gradients, reduce-scattered inside the chunks' lists).
  std::map<int, double> buckets;
};
PhaseLogs describe_phases(const RunPlan& plan, RankPlace at);

// One micro-batch through global chunk `chunk` on its pipeline rank (tp and dp rank 0): the
// forward call (for the last chunk it ends with the loss and the head's backward, inside the
// region kformer::head_backward), the backward call, and under zb-h1 the backward in its two
// calls (B in `backward`, W in `weight`). last_micro: as on the iteration's last micro-batch,
// when the hook marks units done (and sequence parallelism sums the norms' gradients).
struct ChunkLog {
  WorkLog forward, backward, weight;
};
ChunkLog describe_chunk(const RunPlan& plan, int chunk, bool last_micro);

}  // namespace kformer
