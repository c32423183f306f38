// checkpoint_slices (checkpoint/checkpoint_slices.hpp) on its own: every rank of a layout (tp, pp,
// dp, zero; gpt and llama) is built in this one process, each with its ParamStore and Optimizer
// (a data-parallel group that only reports its size and rank stands in for the real one: neither
// constructor communicates), and the pieces they would write must cover every element of every
// full tensor of the model exactly once, with no gap and no overlap; each piece must lie in the
// rank's TP block (ParamSpec's row0/col0 and local shape) and hold the values of the one-rank
// model at the element it names; and every rank's runs must reach all it holds.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_slices.hpp"
#include "model/model_spec.hpp"
#include "model/optimizer.hpp"
#include "model/param_store.hpp"

using namespace kformer;

namespace {

// A group's size and this rank's place in it, for the constructors that read only those.
class ShapeOnly : public comm::Communicator {
 public:
  ShapeOnly(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "shape-only"; }
  std::unique_ptr<Communicator> split(int, int) override { throw std::logic_error("shape-only group: no split"); }
  void barrier() override { throw std::logic_error("shape-only group: no barrier"); }
  void run(const comm::Op&) override { throw std::logic_error("shape-only group: no communication"); }
  comm::Request start(const comm::Op&) override { throw std::logic_error("shape-only group: no communication"); }
  comm::Request start_group(const std::vector<comm::Op>&) override {
    throw std::logic_error("shape-only group: no communication");
  }

 private:
  int rank_, size_;
};

struct Layout {
  Family family;
  int tp, pp, dp, zero, v;  // v: chunks per pipeline rank
};

std::string describe(const Layout& l) {
  return std::string(l.family == Family::gpt ? "gpt" : "llama") + " tp=" + std::to_string(l.tp) +
         " pp=" + std::to_string(l.pp) + " dp=" + std::to_string(l.dp) + " zero=" + std::to_string(l.zero) +
         " v=" + std::to_string(l.v);
}

ModelSettings tiny_model(Family family) {
  ModelSettings m;
  m.family = family;
  m.n_layers = 4;
  m.d_model = 16;
  m.n_heads = 4;
  m.n_kv_heads = family == Family::gpt ? 4 : 2;
  m.ffn_dim = family == Family::gpt ? 64 : 48;
  m.vocab_size = 100;  // padded to 128 or 256 rows: the padding must never reach a checkpoint
  m.max_seq_len = 8;
  return m;
}

std::vector<std::pair<int, int>> even_chunks(int n_layers, int n) {
  std::vector<std::pair<int, int>> c;
  for (int k = 0, first = 0; k < n; ++k) {
    const int count = n_layers / n + (k < n_layers % n ? 1 : 0);
    c.emplace_back(first, count);
    first += count;
  }
  return c;
}

std::vector<float> host_copy(const float* device, std::int64_t n) {
  std::vector<float> h(std::size_t(n), 0.0f);
  if (n > 0) copy_to_host(device, n, h.data());
  return h;
}

constexpr std::uint64_t kSeed = 4321;

void check_layout(const Layout& l) {
  SCOPED_TRACE(describe(l));
  const ModelSettings m = tiny_model(l.family);
  // The reference: the whole model on one rank, values drawn from each element's global index.
  const ModelShape one = model_shape(m, 1, false);
  ParamStore whole(model_params(one), 1, 0);
  whole.initialize(kSeed);
  const std::vector<float> whole_values = host_copy(whole.shard_values(0), whole.size());
  std::map<std::string, std::vector<float>> reference;  // real rows only, row-major, as the checkpoint
  for (const auto& s : whole.slots())
    reference[s.spec.name].assign(whole_values.begin() + s.offset,
                                  whole_values.begin() + s.offset + s.spec.real_rows * s.spec.cols);

  const ModelShape shape = model_shape(m, l.tp, false);
  const auto chunks = even_chunks(m.n_layers, l.pp * l.v);
  std::map<std::string, std::vector<int>> owned;  // times each element is written
  for (const auto& [name, values] : reference) owned[name].assign(values.size(), 0);
  std::int64_t ranks = 0;
  for (int pp_rank = 0; pp_rank < l.pp; ++pp_rank)
    for (int dp_rank = 0; dp_rank < l.dp; ++dp_rank)
      for (int tp_rank = 0; tp_rank < l.tp; ++tp_rank) {
        SCOPED_TRACE("pp_rank " + std::to_string(pp_rank) + " dp_rank " + std::to_string(dp_rank) + " tp_rank " +
                     std::to_string(tp_rank));
        ++ranks;
        ShapeOnly dp(dp_rank, l.dp);
        Numerics num;  // ZeRO's stage only: values sharded at 3, gradients whole, fp32
        num.zero = l.zero;
        ParamStore params(rank_params(shape, chunks, l.pp, pp_rank), l.tp, tp_rank, &dp, num);
        params.initialize(kSeed);
        const bool last = (int(chunks.size()) - 1) % l.pp == pp_rank;
        const bool mirror = shape.gpt && l.pp > 1 && last && pp_rank != 0;
        Optimizer optimizer(params, OptimizerSettings{3e-4, 0.1, 0, 1, l.zero}, &dp, tp_rank,
                            mirror ? -1 : Optimizer::kNoMirror);
        const auto runs = checkpoint_slices(params, optimizer, tp_rank, dp_rank);

        // What this rank holds and updates: its shard of each unit's real elements (all of them
        // without ZeRO), counted per slot, against what its runs' pieces reach.
        std::map<const ParamSlot*, std::int64_t> held, reached;
        const int shards = params.shards(), me = params.shard_rank();
        for (const auto& u : params.units()) {
          const std::int64_t len = u.size / shards, lo = u.offset + me * len, hi = lo + len;
          for (std::size_t i = u.first_slot; i < u.first_slot + u.n_slots; ++i) {
            const ParamSlot& s = params.slots()[i];
            for (std::int64_t e = std::max(lo, s.offset); e < std::min(hi, s.offset + s.rows * s.cols); ++e)
              if (s.row0 + (e - s.offset) / s.cols < s.spec.real_rows) ++held[&s];
          }
        }
        std::int64_t state_next = 0;
        for (const auto& run : runs) {
          const ParamSpec& spec = run.slot->spec;
          SCOPED_TRACE(spec.name);
          ASSERT_EQ(reference.count(spec.name), 1u) << "a run names a tensor the model does not have";
          // The run's moments follow one another in the optimizer's state.
          EXPECT_EQ(run.state_offset, state_next);
          state_next = run.state_offset + run.length;
          // The expected owner: dp rank 0 without ZeRO, TP rank 0 for a replicated tensor, never
          // the last stage's copy of the tied table.
          const bool expect_owned = (params.shards() > 1 || dp_rank == 0) &&
                                    (spec.split != Split::none || tp_rank == 0) && !(mirror && spec.layer == -1);
          EXPECT_EQ(run.owned, expect_owned);
          const std::vector<float> values = host_copy(run.values, run.length);
          const std::int64_t r0 = spec.row0(l.tp, tp_rank), c0 = spec.col0(l.tp, tp_rank);
          const std::int64_t nr = spec.local_rows(l.tp), nc = spec.local_cols(l.tp);
          EXPECT_EQ(run.slot->row0, r0);
          EXPECT_EQ(run.slot->col0, c0);
          std::int64_t prev_end = -1;
          for (const auto& p : run.pieces) {
            ASSERT_GT(p.length, 0);
            ASSERT_GE(p.at, 0);
            ASSERT_LE(p.at + p.length, run.length) << "a piece reaches past its run";
            ASSERT_GT(p.at, prev_end - 1) << "pieces out of order or overlapping within a run";
            prev_end = p.at + p.length;
            ASSERT_GE(p.index, 0);
            ASSERT_LE(p.index + p.length, std::int64_t(reference[spec.name].size()))
                << "a piece reaches past the tensor's real rows";
            for (std::int64_t j = 0; j < p.length; ++j) {
              const std::int64_t e = p.index + j, row = e / spec.cols, col = e % spec.cols;
              // In this rank's TP block, as ParamSpec places it.
              ASSERT_TRUE(row >= r0 && row < r0 + nr && col >= c0 && col < c0 + nc)
                  << "element (" << row << "," << col << ") outside the block at (" << r0 << "," << c0 << ") of "
                  << nr << "x" << nc;
              // The value this rank holds there is the full tensor's value at that element.
              ASSERT_EQ(values[std::size_t(p.at + j)], reference[spec.name][std::size_t(e)])
                  << "piece at " << p.index << "+" << j << " (run element " << p.at + j << ")";
              if (run.owned) ++owned[spec.name][std::size_t(e)];
            }
            reached[run.slot] += p.length;
          }
        }
        EXPECT_EQ(state_next, optimizer.state_elements()) << "the runs leave part of the optimizer state out";
        EXPECT_EQ(reached, held) << "the runs do not reach exactly what this rank holds (real rows of its shard)";
      }
  ASSERT_EQ(ranks, std::int64_t(l.tp) * l.pp * l.dp);
  for (const auto& [name, counts] : owned)
    for (std::size_t e = 0; e < counts.size(); ++e)
      ASSERT_EQ(counts[e], 1) << name << " element " << e << " written " << counts[e]
                              << " times over the layout's ranks";
}

TEST(CheckpointSlices, EveryElementWrittenOnceAtEveryLayout) {
  const std::vector<Layout> layouts = {
      {Family::gpt, 1, 1, 1, 0, 1},   {Family::gpt, 2, 1, 1, 0, 1},   {Family::gpt, 4, 1, 1, 0, 1},
      {Family::gpt, 1, 2, 1, 0, 1},   {Family::gpt, 1, 2, 1, 0, 2},   {Family::gpt, 1, 1, 2, 0, 1},
      {Family::gpt, 1, 1, 4, 1, 1},   {Family::gpt, 1, 1, 3, 2, 1},   {Family::gpt, 2, 2, 2, 0, 1},
      {Family::gpt, 2, 2, 2, 1, 1},   {Family::gpt, 2, 2, 2, 3, 1},   {Family::gpt, 4, 1, 2, 3, 1},
      {Family::gpt, 1, 4, 1, 0, 1},   {Family::gpt, 1, 2, 3, 3, 2},   {Family::llama, 1, 1, 1, 0, 1},
      {Family::llama, 2, 1, 1, 0, 1}, {Family::llama, 1, 2, 2, 1, 1}, {Family::llama, 2, 2, 2, 2, 1},
      {Family::llama, 4, 1, 3, 3, 1}, {Family::llama, 2, 2, 1, 0, 2}, {Family::llama, 1, 1, 4, 3, 1},
  };
  for (const auto& l : layouts) check_layout(l);
}

// The pieces are coalesced: a tensor whose rank block is whole rows (not split by columns) and not
// cut by a ZeRO shard boundary is one piece; a column-split block is one piece per row.
TEST(CheckpointSlices, PiecesCoalesceWholeRowsAndSplitColumnBlocks) {
  const ModelShape shape = model_shape(tiny_model(Family::llama), 2, false);
  const auto chunks = even_chunks(4, 1);
  ParamStore params(rank_params(shape, chunks, 1, 0), 2, 1);
  Optimizer optimizer(params, OptimizerSettings{}, nullptr, 1);
  for (const auto& run : checkpoint_slices(params, optimizer, 1, 0)) {
    const ParamSpec& spec = run.slot->spec;
    SCOPED_TRACE(spec.name);
    if (spec.split == Split::cols)
      EXPECT_EQ(std::int64_t(run.pieces.size()), spec.rows);
    else
      EXPECT_EQ(run.pieces.size(), 1u);
  }
}

}  // namespace
