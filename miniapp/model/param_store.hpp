// A rank's parameters and gradients, each in one flat device buffer (so that data-parallel
// reductions and ZeRO sharding work on contiguous ranges), with a view per named tensor over its
// local TP block. Initialisation draws every element from its global index.
//
// Under ZeRO-3 (FSDP) a rank keeps only its 1/dp shard of each unit's values; require(layer)
// all-gathers a unit into one of a few reusable buffers before a kernel reads it, and a buffer
// is reused (the gathered copy freed) when another unit needs the room. With shard_grads (ZeRO-3
// outside zb-h1, Numerics::shards_grads) the gradients mirror it: a unit's whole gradient lives in a
// reusable buffer only while one micro-batch's backward writes it (open_grads .. close_grads),
// then it is reduce-scattered over dp and this rank's part added to the shard it keeps
// (grad_shards.cpp).
//
// bf16 mixed precision (train.precision=bf16): the values stay the fp32 masters the optimizer
// updates; a bf16 copy of them, refreshed by refresh_bf16(), is what the GEMMs read (w16). Norm
// weights and biases are read in fp32 (v). Gradients are fp32 in both precisions, except:
//
// A bf16 gradient buffer (grads_bf16(), Numerics::bf16_grads(): parallel.grad_reduce_dtype=bf16 over
// dp > 1 where ZeRO-3 does not shard the gradients, as Megatron-LM's --grad-reduce-in-bf16 keeps
// them): the whole gradient is bf16, reduced over dp in place. A unit's backward writes fp32 into
// one of kGradBuffers reusable unit buffers (open_grads .. close_grads, as under ZeRO-3), and the
// last close of each micro-batch adds it into the bf16 gradient, rounding once per micro-batch.
//
// bf16 under ZeRO-1/2 over dp > 1 (masters_sharded()), as DeepSpeed's ZeRO-1 and Megatron-LM's
// distributed optimizer keep it: the fp32 masters are optimizer state, so a rank holds only its
// shard of them; the whole model is its bf16 copy, all-gathered in bf16 after each step
// (allgather_values), and the vectors (norm weights, biases) are read in fp32 from a small
// buffer widened from that copy, as the ZeRO-3 gathers widen theirs. The embedding is read in bf16.
// bf16 under ZeRO-3 likewise reads every matrix in bf16 (matrices_bf16_only()): a gathered unit is
// held in bf16, as FSDP's bf16 param_dtype holds it, and only its vectors are widened.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bf16.hpp"
#include "comm/communicator.hpp"
#include "comm/request.hpp"
#include "platform/device.hpp"
#include "model/model_spec.hpp"
#include "model/numerics.hpp"

namespace kformer {

struct ParamSlot {
  ParamSpec spec;
  std::int64_t offset = 0;          // in the flat (unsharded) layout
  std::int64_t rows = 0, cols = 0;  // local block
  std::int64_t row0 = 0, col0 = 0;  // its place in the global tensor
  std::size_t unit = 0;
};

// The tensors of one layer (or the embedding, or the final norm and head): the unit of gradient
// buckets, ZeRO shards and FSDP gathers. Its range is padded to a multiple of the shard count.
struct ParamUnit {
  int layer = 0;
  std::int64_t offset = 0, size = 0;  // size includes the padding
  std::size_t first_slot = 0, n_slots = 0;
};

// Whole-unit gradient buffers a rank holds under Numerics::shards_grads (under bf16_grads() as
// many as are open at once: two on gpt's last stage, whose head backward writes the tied table's
// too, else one): one being written while the
// other's reduce-scatter is in flight (a one-stage gpt keeps its tied table's open through the
// backward, so there each reduce-scatter completes before the next unit's backward starts).
constexpr std::size_t kGradBuffers = 2;

// A tensor of the store, found by name once (ParamStore::find) where its user is built; the views
// below take it, so a step looks up no name. Default: no tensor (a family's block lacks some).
struct ParamRef {
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t slot = kNone;
  bool valid() const { return slot != kNone; }
};

class ParamStore {
 public:
  // `specs` are the tensors this rank holds (its pipeline stage); tp/tp_rank pick the blocks.
  // With ZeRO >= 1 (numerics.zero) units are padded to split evenly over `dp`; with ZeRO-3 values
  // are sharded; the rest of `numerics` says what else is sharded and in which element types the
  // values, gradients and reductions are held (numerics.hpp).
  ParamStore(const std::vector<ParamSpec>& specs, int tp, int tp_rank, comm::Communicator* dp = nullptr,
             const Numerics& numerics = {});

  void initialize(std::uint64_t seed);  // layout-independent values; padding rows zero
  void zero_grads();

  const std::vector<ParamSlot>& slots() const { return slots_; }
  const std::vector<ParamUnit>& units() const { return units_; }
  const ParamSlot& slot(const std::string& name) const;
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  std::int64_t size() const { return size_; }
  int shards() const { return shards_; }
  int shard_rank() const { return shard_rank_; }
  bool values_sharded() const { return sharded_; }
  // bf16 with ZeRO-1/2 over dp > 1: fp32 masters as shards, the whole model in bf16 (above).
  bool masters_sharded() const { return masters_sharded_; }
  // The matrices are read in bf16 only (w16): masters_sharded(), and bf16 under ZeRO-3, whose
  // gathers keep a unit in bf16 and only its vectors in fp32.
  bool matrices_bf16_only() const { return masters_sharded_ || (sharded_ && bf16_); }

  DV<float*> grads() const { return grads_; }  // the flat layout, or this rank's shards (grads_sharded())
  bool grads_sharded() const { return grads_sharded_; }
  // The bf16 gradient buffer (grads_bf16(); then grads() is empty), in the flat layout.
  DV<kernels::bf16*> grads16() const { return grads16_; }
  bool grads_bf16() const { return grads_bf16_; }
  // Whether a backward writes the gradients through open_grads/close_grads (either of the above).
  bool grads_buffered() const { return grads_sharded_ || grads_bf16_; }
  // This rank's shard of unit u's gradient (the whole unit when not sharded over dp: shards = 1),
  // in fp32, or under grads_bf16() in bf16.
  float* shard_grads(std::size_t u) const;
  kernels::bf16* shard_grads16(std::size_t u) const;
  std::int64_t shard_grad_offset(std::size_t u) const;  // where either starts, in elements
  // grads_buffered(): the unit of `layer` is written by a backward between these two (nested calls
  // share its buffer; the first zeroes it). Under shard_grads the last close starts its
  // reduce-scatter over dp, and its part is added to the shard when the buffer is next needed, or
  // in finish_grads(); under grads_bf16() it adds the buffer into the bf16 gradient.
  // Otherwise both do nothing.
  void open_grads(int layer) const;
  void close_grads(int layer) const;
  void finish_grads() const;  // wait for the reduce-scatters in flight and add them up
  // This rank's shard of unit u's values (the whole unit when not sharded over dp: shards = 1),
  // and where it starts in values(), in elements.
  float* shard_values(std::size_t u) const;
  std::int64_t shard_value_offset(std::size_t u) const;
  DV<float*> values() const { return values_; }  // the whole layout, or this rank's shards under ZeRO-3
  // Unit u's whole values (requires it gathered under ZeRO-3).
  float* unit_values(std::size_t u) const;

  // ZeRO-3: make the unit of `layer` readable (all-gather unless it is still resident).
  void require(int layer) const;
  // ZeRO-3: forget the gathered copies (the optimizer changed the shards).
  void drop_gathered() const;
  // ZeRO-1/2: after each rank updated its shard, give every rank the whole values (under
  // masters_sharded(): round the shard to bf16, all-gather the bf16 copy, widen the vectors).
  void allgather_values() const;

  // Views of a tensor, or of `count` adjacent tensors starting at `first` read as one block of
  // rows (the packed QKV and SwiGLU projections); vectors are 1-D.
  // The handle of the tensor `name` (invalid when this rank holds none of that name).
  ParamRef find(const std::string& name) const;
  DV<float**> w(ParamRef first, int count = 1) const;
  DV<float**> dw(ParamRef first, int count = 1) const;
  DV<float*> v(ParamRef first, int count = 1) const;
  DV<float*> dv(ParamRef first, int count = 1) const;
  // The bf16 copy of w() (bf16 stores only), and w() or w16() by element type.
  DV<kernels::bf16**> w16(ParamRef first, int count = 1) const;
  template <class T>
  DV<T**> wt(ParamRef first, int count = 1) const {
    if constexpr (std::is_same<T, float>::value)
      return w(first, count);
    else
      return w16(first, count);
  }
  // The same by name, where a caller holds no handle (set-up, checkpoints, tests).
  DV<float**> w(const std::string& first, int count = 1) const { return w(ref(first), count); }
  DV<float**> dw(const std::string& first, int count = 1) const { return dw(ref(first), count); }
  DV<float*> v(const std::string& first, int count = 1) const { return v(ref(first), count); }
  DV<float*> dv(const std::string& first, int count = 1) const { return dv(ref(first), count); }
  DV<kernels::bf16**> w16(const std::string& first, int count = 1) const { return w16(ref(first), count); }
  bool bf16() const { return bf16_; }
  // bf16 stores: round the (local or shard) masters into the bf16 copy; call after the values
  // change (initialisation, a checkpoint load, an optimizer step). Nothing to do in fp32, nor
  // under masters_sharded(), where initialize() and allgather_values() keep the copy current.
  void refresh_bf16() const;

  std::int64_t resident_bytes() const;  // values, gradients and gather buffers held now

 private:
  ParamRef ref(const std::string& name) const;  // find(), throwing when there is no such tensor
  const ParamSlot& at(ParamRef r) const;        // throws for an invalid handle
  std::pair<std::int64_t, std::int64_t> block(ParamRef first, int count) const;  // offset, rows
  float* value_ptr(ParamRef first) const;
  // The 1-D tensors of slots [first, last) widened from `from` (holding the layout from element
  // `base`) into `to` at vector_at_: masters_sharded()'s vectors from the bf16 copy, or a bf16
  // ZeRO-3 gather's from the gathered unit.
  void widen_vectors(std::size_t first, std::size_t last, const DV<float*>& to, const DV<kernels::bf16*>& from,
                     std::int64_t base) const;
  float* grad_ptr(ParamRef first) const;

  std::vector<ParamSlot> slots_;
  std::vector<ParamUnit> units_;
  std::map<std::string, std::size_t> index_;
  std::map<int, std::size_t> unit_of_layer_;
  std::int64_t size_ = 0;
  comm::Communicator* dp_ = nullptr;
  int shards_ = 1, shard_rank_ = 0;
  bool sharded_ = false;
  DV<float*> values_, grads_;  // values_: the whole layout, or this rank's shards under ZeRO-3
  bool bf16_ = false;
  DV<kernels::bf16*> values16_;  // bf16 copy of values_ (bf16 stores); the whole layout under masters_sharded_
  bool masters_sharded_ = false;
  // close_grads waits for its reduce-scatter at once where dp progresses on the host (not NCCL):
  // see grad_shards.cpp.
  bool reduce_at_once_ = false;
  DV<float*> vectors_;                   // masters_sharded_: the 1-D tensors, widened from values16_
  // per slot: its place in vectors_ (masters_sharded_), or in its gathered unit's fp32 vectors
  // (bf16 under ZeRO-3); -1 for a matrix
  std::vector<std::int64_t> vector_at_;

  struct Gathered {
    std::size_t unit = 0;
    bool valid = false;
    long last_use = 0;
    DV<float*> buf;            // the gathered unit in fp32; bf16 stores: its vectors only, packed
    DV<kernels::bf16*> buf16;  // bf16 stores: the gathered unit in bf16
  };
  mutable std::vector<Gathered> pool_;
  mutable long clock_ = 0;

  bool grads_sharded_ = false, bf16_grad_reduce_ = false, grads_bf16_ = false;
  DV<kernels::bf16*> grads16_;  // grads_bf16_: the whole gradient
  struct GradBuffer {  // one unit's whole gradient while open or in flight
    std::size_t unit = 0;
    int holders = 0;     // open while > 0
    long started = -1;   // in flight since (a count of reduce-scatters); -1: not in flight
    comm::Request reduce;
    DV<float*> buf;
    DV<kernels::bf16*> buf16;  // bf16_grad_reduce: what travels
  };
  mutable std::vector<GradBuffer> grad_pool_;
  std::int64_t grad_unit_size_ = 0;  // the largest unit's
  mutable long reductions_ = 0;
  GradBuffer& open_buffer(std::size_t u) const;  // throws unless unit u is open
  void complete(GradBuffer& g) const;            // wait for its reduce-scatter, add it to the shard
};

}  // namespace kformer
