// A rank's parameters in flat buffers (see param_store.hpp).
#include "param_store.hpp"

#include <stdexcept>

#include "counter_rng.hpp"

namespace kformer {

ParamStore::ParamStore(const std::vector<ParamSpec>& specs, int tp, int tp_rank, int shards) {
  auto close_unit = [&] {
    ParamUnit& u = units_.back();
    u.size = (size_ - u.offset + shards - 1) / shards * shards;
    size_ = u.offset + u.size;
  };
  for (const auto& s : specs) {
    if (units_.empty() || units_.back().layer != s.layer) {
      if (!units_.empty()) close_unit();
      units_.push_back({s.layer, size_, 0, slots_.size(), 0});
    }
    ParamSlot p{s, size_, s.local_rows(tp), s.local_cols(tp), s.row0(tp, tp_rank), s.col0(tp, tp_rank)};
    index_[s.name] = slots_.size();
    slots_.push_back(p);
    ++units_.back().n_slots;
    size_ += p.rows * p.cols;
  }
  if (!units_.empty()) close_unit();
  values_ = DV<float*>("kformer::params", size_);
  grads_ = DV<float*>("kformer::grads", size_);
}

const ParamSlot& ParamStore::slot(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw std::logic_error("kformer: no parameter named " + name + " on this rank");
  return slots_[it->second];
}

DV<float**> ParamStore::matrix(const DV<float*>& buf, const std::string& first, int count) const {
  const std::size_t i0 = index_.at(first);
  const ParamSlot& s = slots_[i0];
  std::int64_t rows = 0;
  for (int k = 0; k < count; ++k) {
    const ParamSlot& t = slots_.at(i0 + k);
    if (t.cols != s.cols) throw std::logic_error("kformer: packed tensors from " + first + " differ in width");
    rows += t.rows;
  }
  return as_matrix(buf.data() + s.offset, rows, s.cols);
}

DV<float*> ParamStore::vector(const DV<float*>& buf, const std::string& first, int count) const {
  const std::size_t i0 = index_.at(first);
  std::int64_t n = 0;
  for (int k = 0; k < count; ++k) n += slots_.at(i0 + k).rows * slots_.at(i0 + k).cols;
  return as_vector(buf.data() + slots_[i0].offset, n);
}

void ParamStore::initialize(std::uint64_t seed) {
  Exec exec;
  for (const auto& p : slots_) {
    auto view = as_matrix(values_.data() + p.offset, p.rows, p.cols);
    if (p.spec.init == Init::normal) {
      kernels::fill_normal_block(exec, view, kernels::stream_key(seed, p.spec.name), p.spec.cols, p.row0, p.col0,
                                 p.spec.std_dev);
    } else {
      Kokkos::deep_copy(exec, view, p.spec.init == Init::ones ? 1.0f : 0.0f);
    }
    // Rows past the real vocabulary exist only to make the table divide by 64*tp: keep them 0.
    const std::int64_t first_pad = p.spec.real_rows - p.row0;
    if (first_pad < p.rows) {
      const std::int64_t from = first_pad > 0 ? first_pad : 0;
      Kokkos::deep_copy(exec, Kokkos::subview(view, std::make_pair(from, p.rows), Kokkos::ALL()), 0.0f);
    }
  }
  exec.fence();
}

void ParamStore::zero_grads() { Kokkos::deep_copy(grads_, 0.0f); }

}  // namespace kformer
