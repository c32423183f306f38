// Data-parallel gradient reduction in buckets (one per unit: a layer, the embedding, the final
// norm and head), started non-blocking as the last micro-batch's backward completes each unit,
// so it overlaps the backward of the layers below; finish() waits for what is still in flight
// and that wait is the exposed communication. zero <= 1 all-reduces; zero >= 2 reduce-scatters
// (each rank keeps the reduced gradient of its own shard, which is all its optimizer reads).
// With parallel.grad_reduce_dtype=bf16 the gradient is the store's bf16 buffer
// (ParamStore::grads_bf16), reduced in place (half the bytes; MPI sums in fp32 per message, NCCL
// in bf16). Only under zb-h1, whose deferred weight gradients keep an fp32 buffer, is a unit's
// gradient rounded into a bf16 copy that travels, and finish() widens the reduced copy back.
// When ZeRO-3 shards the gradients (ParamStore::grads_sharded) the store reduce-scatters each
// unit as each micro-batch's backward ends, and finish() waits for the last of those.
#pragma once

#include <vector>

#include "comm/communicator.hpp"
#include "model/param_store.hpp"

namespace kformer {

class GradSync {
 public:
  // numerics: ZeRO's stage and the reduction's element type (model/numerics.hpp).
  GradSync(ParamStore& params, comm::Communicator* dp, const Numerics& numerics);

  void unit_done(int layer);  // start that unit's reduction
  void finish();              // wait for all; every unit must have been started
  double exposed_ms() const { return exposed_ms_; }

 private:
  template <class T>
  void post(T* g, std::int64_t size, comm::DType type);  // one unit's bucket

  ParamStore& p_;
  comm::Communicator* dp_;
  int zero_;
  std::vector<comm::Request> pending_;
  bool bf16_ = false;                      // a bf16 copy travels (zb-h1)
  DV<kernels::bf16*> grads16_;             // that copy
  std::vector<std::size_t> started_;       // bf16 reduce: units to widen back after the wait
  double exposed_ms_ = 0;
};

}  // namespace kformer
