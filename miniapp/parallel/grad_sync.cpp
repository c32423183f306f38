// Bucketed, overlapped data-parallel gradient reduction (see grad_sync.hpp).
#include "parallel/grad_sync.hpp"

#include <Kokkos_Timer.hpp>

#include "convert.hpp"

namespace kformer {

GradSync::GradSync(ParamStore& params, comm::Communicator* dp, const Numerics& n)
    : p_(params), dp_(dp), zero_(n.zero), bf16_(n.bf16_reduce() && dp && dp->size() > 1 && !params.grads_buffered()) {
  const MemoryKindScope kind(MemoryKind::grads);
  if (bf16_) grads16_ = device_buffer<kernels::bf16*>("kformer::grads_bf16", p_.size());
}

namespace {
std::pair<std::int64_t, std::int64_t> range(std::int64_t offset, std::int64_t n) { return {offset, offset + n}; }
}  // namespace

void GradSync::unit_done(int layer) {
  if (!dp_ || dp_->size() == 1 || p_.grads_sharded()) return;  // sharded: reduce-scattered as each backward ended
  // Where the backend progresses on the host (MPI without a progress thread), the buckets already
  // posted move only inside MPI calls: test them here, between the units' backwards.
  for (comm::Request& r : pending_)
    if (!r.done()) r.test();
  for (std::size_t k = 0; k < p_.units().size(); ++k) {
    const ParamUnit& u = p_.units()[k];
    if (u.layer != layer) continue;
    if (p_.grads_bf16()) {  // the bf16 gradient itself, in place
      post(p_.grads16().data() + u.offset, u.size, comm::DType::bf16);
    } else if (bf16_) {  // a bf16 copy travels
      Exec exec;
      kernels::convert(exec, Kokkos::subview(grads16_, range(u.offset, u.size)),
                       Kokkos::subview(p_.grads(), range(u.offset, u.size)));
      started_.push_back(k);
      post(grads16_.data() + u.offset, u.size, comm::DType::bf16);
    } else {
      post(p_.grads().data() + u.offset, u.size, comm::DType::f32);
    }
  }
}

// One unit's bucket of `size` elements at g, in place: all-reduced, or under ZeRO >= 2
// reduce-scattered into this rank's 1/dp part.
template <class T>
void GradSync::post(T* g, std::int64_t size, comm::DType type) {
  const int n = dp_->size();
  if (zero_ >= 2)
    pending_.push_back(dp_->ireduce_scatter(g, g + dp_->rank() * (size / n), size / n, type, comm::ReduceOp::sum));
  else
    pending_.push_back(dp_->iallreduce(g, g, size, type, comm::ReduceOp::sum));
}

void GradSync::finish() {
  exposed_ms_ = 0;
  if (!dp_ || dp_->size() == 1) return;  // nothing was started
  // Compute still queued (the last layers' backward) is not the exposed communication: fenced
  // before the clock starts. On the host it costs nothing.
  dp_->fence_compute(true);
  Kokkos::Timer t;
  comm::wait_all(pending_);
  pending_.clear();
  p_.finish_grads();
  exposed_ms_ = t.seconds() * 1e3;
  Exec exec;
  for (const std::size_t k : started_) {  // the reduced bf16 gradient (or this rank's shard of it) back in fp32
    const ParamUnit& u = p_.units()[k];
    const std::int64_t n = zero_ >= 2 ? u.size / dp_->size() : u.size;
    const std::int64_t at = u.offset + (zero_ >= 2 ? dp_->rank() * n : 0);
    kernels::convert(exec, Kokkos::subview(p_.grads(), range(at, n)), Kokkos::subview(grads16_, range(at, n)));
  }
  started_.clear();  // no fence: the optimizer reads the gradients on the same execution space
}

}  // namespace kformer
