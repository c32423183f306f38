// Data-parallel gradient reduction in buckets (one per unit: a layer, the embedding, the final
// norm and head), started non-blocking as the last micro-batch's backward completes each unit,
// so it overlaps the backward of the layers below; finish() waits for what is still in flight
// and that wait is the exposed communication. zero <= 1 all-reduces; zero >= 2 reduce-scatters
// (each rank keeps the reduced gradient of its own shard, which is all its optimizer reads).
#pragma once

#include <vector>

#include "comm/communicator.hpp"
#include "param_store.hpp"

namespace kformer {

class GradSync {
 public:
  GradSync(ParamStore& params, comm::Communicator* dp, int zero);

  void unit_done(int layer);  // start that unit's reduction
  void finish();              // wait for all; every unit must have been started
  double exposed_ms() const { return exposed_ms_; }

 private:
  ParamStore& p_;
  comm::Communicator* dp_;
  int zero_;
  std::vector<comm::Request> pending_;
  double exposed_ms_ = 0;
};

}  // namespace kformer
