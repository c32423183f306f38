// Bucketed, overlapped data-parallel gradient reduction (see grad_sync.hpp).
#include "grad_sync.hpp"

#include <Kokkos_Timer.hpp>

namespace kformer {

GradSync::GradSync(ParamStore& params, comm::Communicator* dp, int zero) : p_(params), dp_(dp), zero_(zero) {}

void GradSync::unit_done(int layer) {
  if (!dp_ || dp_->size() == 1) return;
  for (const auto& u : p_.units()) {
    if (u.layer != layer) continue;
    float* g = p_.grads().data() + u.offset;
    const int n = dp_->size();
    if (zero_ >= 2)
      pending_.push_back(dp_->ireduce_scatter(g, g + dp_->rank() * (u.size / n), u.size / n, comm::DType::f32,
                                              comm::ReduceOp::sum));
    else
      pending_.push_back(dp_->iallreduce(g, g, u.size, comm::DType::f32, comm::ReduceOp::sum));
  }
}

void GradSync::finish() {
  // Compute still queued (the last layers' backward) is not the exposed communication: fenced
  // before the clock starts. On the host, or after the stage's own fence, it costs nothing.
  if (dp_) dp_->fence_compute(true);
  Kokkos::Timer t;
  comm::wait_all(pending_);
  pending_.clear();
  exposed_ms_ = t.seconds() * 1e3;
}

}  // namespace kformer
