// Gradients written through reusable unit buffers (see param_store.hpp): ZeRO-3's sharded
// gradients, and the bf16 gradient buffer, into which close_grads adds each micro-batch's fp32.
// ZeRO-3's sharded gradients: FSDP's reduce-scatter after each unit's
// backward, the mirror of require()'s all-gather before its use. A rank keeps its 1/dp shard of
// each unit's gradient (grads_), summed over the iteration's micro-batches; a unit's whole
// gradient exists only in one of kGradBuffers reusable buffers, from open_grads to the last
// close_grads of one micro-batch's backward. That close starts the buffer's reduce-scatter over
// dp; on NCCL it runs on the device beside the next unit's backward, and its result, this rank's
// part of the sum, is added to the shard when the buffer is needed again or in finish_grads(). A
// backend that progresses on the host (mpi without a progress thread) completes it at once: there
// a posted reduce-scatter moves only inside later MPI calls, and it made each blocking gather of
// the next units' backward about ten times slower (session 13, 2 ranks on one Zen 5: 15 ms against
// 0.6-2 ms for a 2.95 MB gather; the step 1.45 times slower than with the reduce-scatter waited for
// at once).
#include <stdexcept>

#include "convert.hpp"
#include "model/param_store.hpp"
#include "platform/profiling_region.hpp"
#include "residual.hpp"

namespace kformer {

std::int64_t ParamStore::shard_grad_offset(std::size_t u) const {
  const ParamUnit& unit = units_[u];
  if (grads_sharded_) return unit.offset / shards_;
  return unit.offset + shard_rank_ * (unit.size / shards_);
}

float* ParamStore::shard_grads(std::size_t u) const {
  if (grads_bf16_)
    throw std::logic_error("kformer: the gradient of layer " + std::to_string(units_[u].layer) +
                           " read in fp32 from a bf16 gradient buffer");
  return grads_.data() + shard_grad_offset(u);
}

kernels::bf16* ParamStore::shard_grads16(std::size_t u) const {
  if (!grads_bf16_)
    throw std::logic_error("kformer: the gradient of layer " + std::to_string(units_[u].layer) +
                           " read in bf16 from fp32");
  return grads16_.data() + shard_grad_offset(u);
}

float* ParamStore::grad_ptr(ParamRef first) const {
  const ParamSlot& s = at(first);
  if (!grads_buffered()) return grads_.data() + s.offset;
  return open_buffer(s.unit).buf.data() + (s.offset - units_[s.unit].offset);
}

ParamStore::GradBuffer& ParamStore::open_buffer(std::size_t u) const {
  for (auto& g : grad_pool_)
    if (g.holders > 0 && g.unit == u) return g;
  throw std::logic_error("kformer: the gradient of layer " + std::to_string(units_[u].layer) +
                         " written outside open_grads()/close_grads() (ZeRO-3, or a bf16 gradient buffer)");
}

void ParamStore::open_grads(int layer) const {
  if (!grads_buffered()) return;
  const std::size_t u = unit_of_layer_.at(layer);
  for (auto& g : grad_pool_)
    if (g.holders > 0 && g.unit == u) {
      ++g.holders;
      return;
    }
  // A buffer neither open nor in flight, else the one in flight longest, once it has landed.
  GradBuffer* free = nullptr;
  for (auto& g : grad_pool_) {
    if (g.holders > 0) continue;
    if (g.started < 0) {
      free = &g;
      break;
    }
    if (!free || g.started < free->started) free = &g;
  }
  if (!free && grads_bf16_ && grad_pool_.size() < kGradBuffers) {  // the first iteration's allocations
    const MemoryKindScope kind(MemoryKind::grads);
    grad_pool_.emplace_back();
    grad_pool_.back().buf = device_buffer<float*>("kformer::unit_grads", grad_unit_size_);
    free = &grad_pool_.back();
  }
  if (!free)
    throw std::logic_error("kformer: more than " + std::to_string(grad_pool_.size()) +
                           " units' gradients open at once");
  if (free->started >= 0) complete(*free);
  kernels::fill(Exec(), Kokkos::subview(free->buf, std::make_pair(std::int64_t(0), units_[u].size)), 0.0f);
  free->unit = u;
  free->holders = 1;
}

void ParamStore::close_grads(int layer) const {
  if (!grads_buffered()) return;
  GradBuffer& g = open_buffer(unit_of_layer_.at(layer));
  if (--g.holders > 0) return;
  const std::int64_t size = units_[g.unit].size, n = size / shards_;
  if (grads_bf16_) {  // this micro-batch's fp32 gradient added into the bf16 one: one rounding
    const auto whole = std::make_pair(units_[g.unit].offset, units_[g.unit].offset + size);
    const auto g16 = Kokkos::subview(grads16_, whole);
    kernels::residual_forward(Exec(), g16, g16, Kokkos::subview(g.buf, std::make_pair(std::int64_t(0), size)));
    return;  // no fence: the buffer is zeroed for its next unit on the same execution space
  }
  if (bf16_grad_reduce_) {  // rounded once per micro-batch; summed in bf16 (NCCL) or fp32 (MPI) on the wire
    Exec exec;
    const auto all = std::make_pair(std::int64_t(0), size);
    kernels::convert(exec, Kokkos::subview(g.buf16, all), Kokkos::subview(g.buf, all));
    kernels::bf16* b = g.buf16.data();
    g.reduce = dp_->ireduce_scatter(b, b + shard_rank_ * n, n, comm::DType::bf16, comm::ReduceOp::sum);
  } else {
    float* b = g.buf.data();
    g.reduce = dp_->ireduce_scatter(b, b + shard_rank_ * n, n, comm::DType::f32, comm::ReduceOp::sum);
  }
  g.started = reductions_++;
  if (reduce_at_once_) complete(g);  // progressed on the host: now
}

void ParamStore::complete(GradBuffer& g) const {
  // Which units land where depends on the buffers' history, as a require's gather does: a region
  // of its own, so that a described chunk's list can be compared with a pipeline's without it.
  const ProfilingRegion region("kformer::grads_landed");
  g.reduce.wait();
  const std::int64_t n = units_[g.unit].size / shards_;
  const auto part = std::make_pair(shard_rank_ * n, (shard_rank_ + 1) * n);
  const DV<float*> shard = as_vector(shard_grads(g.unit), n);
  Exec exec;
  if (bf16_grad_reduce_)
    kernels::residual_forward(exec, shard, shard, Kokkos::subview(g.buf16, part));  // shard += widened part
  else
    kernels::residual_forward(exec, shard, shard, Kokkos::subview(g.buf, part));  // shard += part
  exec.fence();  // the buffer may be zeroed for another unit next
  g.started = -1;
}

void ParamStore::finish_grads() const {
  if (!grads_sharded_) return;
  for (;;) {  // in the order they started
    GradBuffer* next = nullptr;
    for (auto& g : grad_pool_)
      if (g.started >= 0 && (!next || g.started < next->started)) next = &g;
    if (!next) return;
    complete(*next);
  }
}

}  // namespace kformer
