// The memory estimate per rank, from the step's description (see memory_estimate.hpp).
#include "train/memory_estimate.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "platform/described_memory.hpp"
#include "train/described_rank.hpp"

namespace kformer {
namespace {

// Keeps no work, only the buffers the kernels keep between calls: the most each label asks.
class KeptBuffers : public WorkLog {
 public:
  void kernel(const kernels::KernelCall&) override {}
  void region(const char*, bool) override {}
  void mark(const char*, int) override {}
  void comm(const comm::Op&, const std::string&, int) override {}
  void unit_done(int) override {}
  void kept(const char* label, double bytes) override {
    double& most = most_[label];
    most = std::max(most, bytes);
  }
  double total() const {
    double t = 0;
    for (const auto& k : most_) t += k.second;
    return t;
  }

 private:
  std::map<std::string, double> most_;
};

// The first rank of pipeline stage `stage` (its tp and dp replicas hold as much), built and walked
// through one whole iteration: every buffer the run would hold at its peak (all are made in the
// first iteration and kept), by the kind of the scope that made it.
MemoryEstimate estimate_stage(const RunPlan& plan, int stage) {
  KeptBuffers kept;
  const DescribedBytes made;
  DescribedRank r(plan, {stage, 0, 0}, kept);
  describe_iteration_of(plan, r, kept);
  MemoryEstimate e;
  e.params = made.of(MemoryKind::params);
  e.grads = made.of(MemoryKind::grads);
  e.optimizer = made.of(MemoryKind::optimizer);
  e.activations = made.of(MemoryKind::activations);
  e.workspace = made.of(MemoryKind::workspace) + kept.total();
  e.bf16 = plan.numerics.bf16();
  e.masters_sharded = plan.numerics.shards_masters;
  e.micro_batches_in_flight = 0;
  for (const auto& st : r.model->stages) e.micro_batches_in_flight += int(st->slots_allocated());
  return e;
}

}  // namespace

MemoryEstimate estimate_memory(const RunPlan& plan) {
  estimates_made().fetch_add(1);
  MemoryEstimate worst;
  double acts = 0;
  for (int st = 0; st < plan.settings.parallel.pp; ++st) {
    const MemoryEstimate e = estimate_stage(plan, st);
    if (e.total() > worst.total()) worst = e;
    acts = std::max(acts, e.activations);
  }
  worst.activations_most = acts;
  return worst;
}

}  // namespace kformer
