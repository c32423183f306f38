// A rank's parameters, gradients and AdamW moments, each in one flat device buffer (so that
// data-parallel reductions and ZeRO sharding work on contiguous ranges), with a view per named
// tensor over its local TP block. Initialisation draws every element from its global index.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "device.hpp"
#include "model_spec.hpp"

namespace kformer {

struct ParamSlot {
  ParamSpec spec;
  std::int64_t offset = 0;     // in the flat buffers
  std::int64_t rows = 0, cols = 0;  // local block
  std::int64_t row0 = 0, col0 = 0;  // its place in the global tensor
};

// The tensors of one layer (or the embedding, or the final norm and head): the unit of gradient
// buckets, ZeRO shards and FSDP gathers. Its range is padded to a multiple of the shard count.
struct ParamUnit {
  int layer = 0;
  std::int64_t offset = 0, size = 0;  // size includes the padding
  std::size_t first_slot = 0, n_slots = 0;
};

class ParamStore {
 public:
  // `specs` are the tensors this rank holds (its pipeline stage); tp/tp_rank pick the blocks;
  // every unit is padded so that `shards` ranks can split it evenly.
  ParamStore(const std::vector<ParamSpec>& specs, int tp, int tp_rank, int shards = 1);

  void initialize(std::uint64_t seed);  // layout-independent values; padding rows zero
  void zero_grads();

  const std::vector<ParamSlot>& slots() const { return slots_; }
  const std::vector<ParamUnit>& units() const { return units_; }
  const ParamSlot& slot(const std::string& name) const;
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  std::int64_t size() const { return size_; }

  DV<float*> values() const { return values_; }
  DV<float*> grads() const { return grads_; }

  // Views of a tensor, or of `count` adjacent tensors starting at `first` read as one block of
  // rows (the packed QKV and SwiGLU projections); vectors are 1-D.
  DV<float**> w(const std::string& first, int count = 1) const { return matrix(values_, first, count); }
  DV<float**> dw(const std::string& first, int count = 1) const { return matrix(grads_, first, count); }
  DV<float*> v(const std::string& first, int count = 1) const { return vector(values_, first, count); }
  DV<float*> dv(const std::string& first, int count = 1) const { return vector(grads_, first, count); }

 private:
  DV<float**> matrix(const DV<float*>& buf, const std::string& first, int count) const;
  DV<float*> vector(const DV<float*>& buf, const std::string& first, int count) const;

  std::vector<ParamSlot> slots_;
  std::vector<ParamUnit> units_;
  std::map<std::string, std::size_t> index_;
  std::int64_t size_ = 0;
  DV<float*> values_, grads_;
};

}  // namespace kformer
