// A rank's parameters in flat buffers, ZeRO-3 gathers (see param_store.hpp).
#include "model/param_store.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "convert.hpp"
#include "counter_rng.hpp"
#include "platform/profiling_region.hpp"

namespace kformer {
namespace {
// Gathered units kept at once under ZeRO-3: a block's own, and at the ends of the model the
// embedding, the final norm and the (tied) head, which are needed together.
constexpr std::size_t kPoolSize = 3;
}  // namespace

ParamStore::ParamStore(const std::vector<ParamSpec>& specs, int tp, int tp_rank, comm::Communicator* dp,
                       const Numerics& n)
    : dp_(dp), bf16_(n.bf16()) {
  if (n.zero >= 1 && dp && dp->size() > 1) {
    shards_ = dp->size();
    shard_rank_ = dp->rank();
    sharded_ = n.zero >= 3;
    masters_sharded_ = n.shards_masters;
    reduce_at_once_ = dp->backend().find("nccl") == std::string::npos;
    grads_sharded_ = sharded_ && n.shards_grads;
    bf16_grad_reduce_ = n.bf16_reduce();
  }
  auto close_unit = [&] {
    ParamUnit& u = units_.back();
    u.size = (size_ - u.offset + shards_ - 1) / shards_ * shards_;
    size_ = u.offset + u.size;
  };
  for (const auto& s : specs) {
    if (units_.empty() || units_.back().layer != s.layer) {
      if (!units_.empty()) close_unit();
      unit_of_layer_[s.layer] = units_.size();
      units_.push_back({s.layer, size_, 0, slots_.size(), 0});
    }
    ParamSlot p{s, size_, s.local_rows(tp), s.local_cols(tp), s.row0(tp, tp_rank), s.col0(tp, tp_rank),
                units_.size() - 1};
    index_[s.name] = slots_.size();
    slots_.push_back(p);
    ++units_.back().n_slots;
    size_ += p.rows * p.cols;
  }
  if (!units_.empty()) close_unit();
  grads_bf16_ = n.bf16_grads() && dp && dp->size() > 1 && !grads_sharded_;
  std::optional<MemoryKindScope> kind(MemoryKind::grads);
  grads_ = device_buffer<float*>("kformer::grads", grads_bf16_ ? 0 : grads_sharded_ ? size_ / shards_ : size_);
  if (grads_bf16_) grads16_ = device_buffer<kernels::bf16*>("kformer::grads_bf16", size_);
  kind.emplace(MemoryKind::params);
  values_ = device_buffer<float*>("kformer::params", sharded_ || masters_sharded_ ? size_ / shards_ : size_);
  if (bf16_) values16_ = device_buffer<kernels::bf16*>("kformer::params_bf16", sharded_ ? size_ / shards_ : size_);
  if (masters_sharded_) {  // the vectors, packed in slot order (so adjacent ones stay adjacent)
    std::int64_t n = 0;
    for (const auto& p : slots_) {
      vector_at_.push_back(p.cols == 1 ? n : -1);
      if (p.cols == 1) n += p.rows;
    }
    vectors_ = device_buffer<float*>("kformer::vectors", n);
  }
  std::int64_t largest = 0, most_vectors = 0;
  if (sharded_ && bf16_) vector_at_.assign(slots_.size(), -1);
  for (const auto& u : units_) {
    largest = std::max(largest, u.size);
    if (!sharded_ || !bf16_) continue;
    std::int64_t n = 0;  // bf16 ZeRO-3: the unit's 1-D tensors, packed in slot order
    for (std::size_t i = u.first_slot; i < u.first_slot + u.n_slots; ++i) {
      if (slots_[i].cols == 1) vector_at_[i] = n, n += slots_[i].rows;
    }
    most_vectors = std::max(most_vectors, n);
  }
  if (sharded_) {
    pool_.resize(std::min(kPoolSize, units_.size()));
    for (auto& g : pool_) {  // bf16: the unit in bf16, and its vectors widened to fp32
      g.buf = device_buffer<float*>("kformer::gathered_params", bf16_ ? most_vectors : largest);
      if (bf16_) g.buf16 = device_buffer<kernels::bf16*>("kformer::gathered_params_bf16", largest);
    }
  }
  grad_unit_size_ = largest;
  kind.emplace(MemoryKind::grads);
  if (grads_sharded_) {  // under grads_bf16_ open_grads adds buffers as units are open at once
    grad_pool_.resize(std::min(kGradBuffers, units_.size()));
    for (auto& g : grad_pool_) {
      g.buf = device_buffer<float*>("kformer::unit_grads", largest);
      if (bf16_grad_reduce_) g.buf16 = device_buffer<kernels::bf16*>("kformer::unit_grads_bf16", largest);
    }
  }
}

const ParamSlot& ParamStore::slot(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw std::logic_error("kformer: no parameter named " + name + " on this rank");
  return slots_[it->second];
}

float* ParamStore::shard_values(std::size_t u) const { return values_.data() + shard_value_offset(u); }

std::int64_t ParamStore::shard_value_offset(std::size_t u) const {
  const ParamUnit& unit = units_[u];
  if (sharded_ || masters_sharded_) return unit.offset / shards_;
  return unit.offset + shard_rank_ * (unit.size / shards_);
}

float* ParamStore::unit_values(std::size_t u) const {
  if (masters_sharded_)
    throw std::logic_error("kformer: layer " + std::to_string(units_[u].layer) +
                           " has no whole fp32 values: bf16 under ZeRO-1/2 keeps the masters as shards");
  // bf16 under ZeRO-3: what this returns is the unit's vectors, packed (value_ptr)
  if (!sharded_) return values_.data() + units_[u].offset;
  for (auto& g : pool_)
    if (g.valid && g.unit == u) return g.buf.data();
  throw std::logic_error("kformer: layer " + std::to_string(units_[u].layer) +
                         " read under ZeRO-3 without require()");
}

void ParamStore::require(int layer) const {
  if (kernels::CallSink* sink = kernels::described()) sink->mark("require", layer);  // predict's gathers
  if (!sharded_) return;
  const ProfilingRegion region("kformer::require");  // what a miss costs: the gather, and in bf16 its widening
  const std::size_t u = unit_of_layer_.at(layer);
  ++clock_;
  for (auto& g : pool_)
    if (g.valid && g.unit == u) {
      g.last_use = clock_;
      return;
    }
  auto victim = std::min_element(pool_.begin(), pool_.end(), [](const Gathered& a, const Gathered& b) {
    return a.valid != b.valid ? !a.valid : a.last_use < b.last_use;
  });
  const std::int64_t n = units_[u].size / shards_;
  if (!bf16_) {
    dp_->allgather(shard_values(u), victim->buf.data(), n, comm::DType::f32);
  } else {
    // FSDP in mixed precision gathers the bf16 copies (half the traffic, as torch's FSDP with a
    // bf16 param_dtype), which the GEMMs and the embedding read; the norms and biases are read in
    // fp32, widened into the small buffer beside it.
    dp_->allgather(values16_.data() + units_[u].offset / shards_, victim->buf16.data(), n, comm::DType::bf16);
    const ParamUnit& unit = units_[u];
    widen_vectors(unit.first_slot, unit.first_slot + unit.n_slots, victim->buf, victim->buf16, unit.offset);
  }
  *victim = {u, true, clock_, victim->buf, victim->buf16};
}

void ParamStore::refresh_bf16() const {
  if (!bf16_ || masters_sharded_) return;
  kernels::convert(Exec(), values16_, values_);  // no fence: the GEMMs read it on the same execution space
}

ParamRef ParamStore::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? ParamRef{} : ParamRef{it->second};
}

ParamRef ParamStore::ref(const std::string& name) const {
  const ParamRef r = find(name);
  if (!r.valid()) throw std::out_of_range("kformer: no parameter " + name + " on this rank");
  return r;
}

const ParamSlot& ParamStore::at(ParamRef r) const {
  if (!r.valid()) throw std::logic_error("kformer: a parameter this rank's model does not hold was read");
  return slots_.at(r.slot);
}

DV<kernels::bf16**> ParamStore::w16(ParamRef first, int count) const {
  if (!bf16_) throw std::logic_error("kformer: bf16 weights read from an fp32 parameter store");
  const ParamSlot& s = at(first);
  kernels::bf16* base = nullptr;
  if (!sharded_) {
    base = values16_.data() + units_[s.unit].offset;
  } else {
    unit_values(s.unit);  // throws unless gathered
    for (auto& g : pool_)
      if (g.valid && g.unit == s.unit) base = g.buf16.data();
  }
  return Kokkos::View<kernels::bf16**, Kokkos::LayoutRight, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
      base + (s.offset - units_[s.unit].offset), block(first, count).second, s.cols);
}

void ParamStore::drop_gathered() const {
  for (auto& g : pool_) g.valid = false;
}

void ParamStore::allgather_values() const {
  if (sharded_ || shards_ == 1) return;
  if (masters_sharded_) {  // each rank rounds its shard into its place in the bf16 copy; that travels
    Exec exec;
    for (std::size_t u = 0; u < units_.size(); ++u) {
      const std::int64_t n = units_[u].size / shards_, at = units_[u].offset + shard_rank_ * n;
      kernels::convert(exec, Kokkos::subview(values16_, std::make_pair(at, at + n)), as_vector(shard_values(u), n));
    }
    for (std::size_t u = 0; u < units_.size(); ++u) {
      const std::int64_t n = units_[u].size / shards_, at = units_[u].offset;
      dp_->allgather(values16_.data() + at + shard_rank_ * n, values16_.data() + at, n, comm::DType::bf16);
    }
    widen_vectors(0, slots_.size(), vectors_, values16_, 0);
    return;
  }
  for (std::size_t u = 0; u < units_.size(); ++u)  // in place: this rank's shard is at its offset
    dp_->allgather(shard_values(u), unit_values(u), units_[u].size / shards_, comm::DType::f32);
}

std::pair<std::int64_t, std::int64_t> ParamStore::block(ParamRef first, int count) const {
  const ParamSlot& s = at(first);
  std::int64_t rows = 0;
  for (int k = 0; k < count; ++k) {
    const ParamSlot& t = slots_.at(first.slot + k);
    if (t.cols != s.cols || t.unit != s.unit)
      throw std::logic_error("kformer: tensors packed from " + s.spec.name + " differ in width or layer");
    rows += t.rows;
  }
  return {s.offset, rows};
}

void ParamStore::widen_vectors(std::size_t first, std::size_t last, const DV<float*>& to,
                               const DV<kernels::bf16*>& from, std::int64_t base) const {
  Exec exec;
  for (std::size_t i = first; i < last; ++i) {
    if (vector_at_[i] < 0) continue;
    const std::int64_t at = vector_at_[i], n = slots_[i].rows, src = slots_[i].offset - base;
    kernels::convert(exec, Kokkos::subview(to, std::make_pair(at, at + n)),
                     Kokkos::subview(from, std::make_pair(src, src + n)));
  }
}

float* ParamStore::value_ptr(ParamRef first) const {
  const ParamSlot& s = at(first);
  if (masters_sharded_) {
    if (vector_at_[first.slot] < 0)
      throw std::logic_error("kformer: " + s.spec.name + " is read in fp32, but bf16 under ZeRO-1/2 holds it in bf16 only");
    return vectors_.data() + vector_at_[first.slot];
  }
  if (sharded_ && bf16_) {
    if (vector_at_[first.slot] < 0)
      throw std::logic_error("kformer: " + s.spec.name + " is read in fp32, but bf16 under ZeRO-3 gathers it in bf16 only");
    return unit_values(s.unit) + vector_at_[first.slot];
  }
  return unit_values(s.unit) + (s.offset - units_[s.unit].offset);
}

DV<float**> ParamStore::w(ParamRef first, int count) const {
  return as_matrix(value_ptr(first), block(first, count).second, at(first).cols);
}
DV<float**> ParamStore::dw(ParamRef first, int count) const {
  return as_matrix(grad_ptr(first), block(first, count).second, at(first).cols);
}
DV<float*> ParamStore::v(ParamRef first, int count) const {
  return as_vector(value_ptr(first), block(first, count).second * at(first).cols);
}
DV<float*> ParamStore::dv(ParamRef first, int count) const {
  return as_vector(grad_ptr(first), block(first, count).second * at(first).cols);
}

void ParamStore::initialize(std::uint64_t seed) {
  Exec exec;
  DV<float*> whole;  // under ZeRO-3 each unit is drawn whole here, then this rank keeps its shard
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const ParamUnit& unit = units_[u];
    float* base = values_.data() + unit.offset;
    if (sharded_ || masters_sharded_) {
      if (whole.extent(0) < std::size_t(unit.size)) whole = device_buffer<float*>("kformer::init_unit", unit.size);
      Kokkos::deep_copy(exec, whole, 0.0f);
      base = whole.data();
    }
    for (std::size_t i = unit.first_slot; i < unit.first_slot + unit.n_slots; ++i) {
      const ParamSlot& p = slots_[i];
      auto view = as_matrix(base + (p.offset - unit.offset), p.rows, p.cols);
      if (p.spec.init == Init::normal)
        kernels::fill_normal_block(exec, view, kernels::stream_key(seed, p.spec.name), p.spec.cols, p.row0, p.col0,
                                   p.spec.std_dev);
      else
        Kokkos::deep_copy(exec, view, p.spec.init == Init::ones ? 1.0f : 0.0f);
      // Rows past the real vocabulary exist only to make the table divide by 64*tp: keep them 0.
      const std::int64_t first_pad = std::max<std::int64_t>(0, p.spec.real_rows - p.row0);
      if (first_pad < p.rows)
        Kokkos::deep_copy(exec, Kokkos::subview(view, std::make_pair(first_pad, p.rows), Kokkos::ALL()), 0.0f);
    }
    if (sharded_ || masters_sharded_) {
      const std::int64_t n = unit.size / shards_;
      Kokkos::deep_copy(exec, as_vector(shard_values(u), n), as_vector(base + shard_rank_ * n, n));
    }
    if (masters_sharded_)  // the whole unit's bf16 copy, as allgather_values() would give it
      kernels::convert(exec, Kokkos::subview(values16_, std::make_pair(unit.offset, unit.offset + unit.size)),
                       as_vector(base, unit.size));
  }
  if (masters_sharded_) widen_vectors(0, slots_.size(), vectors_, values16_, 0);
  exec.fence();
}

// A fill on the execution space: without one, deep_copy fences before and after.
void ParamStore::zero_grads() {
  if (grads_bf16_)
    kernels::fill(Exec(), grads16_, kernels::bf16(0.0f));
  else
    kernels::fill(Exec(), grads_, 0.0f);
}

std::int64_t ParamStore::resident_bytes() const {
  std::int64_t n = values_.span() + grads_.span() + vectors_.span();
  for (const auto& g : pool_) n += g.buf.span();
  for (const auto& g : grad_pool_) n += g.buf.span();
  std::int64_t halves = values16_.span() + grads16_.span();
  for (const auto& g : pool_) halves += g.buf16.span();
  for (const auto& g : grad_pool_) halves += g.buf16.span();
  return n * std::int64_t(sizeof(float)) + halves * std::int64_t(sizeof(kernels::bf16));
}

}  // namespace kformer
