// GradSync (parallel/grad_sync.hpp) and ZeRO-3's sharded gradients (parallel/grad_shards.cpp) on
// their own, over the data-parallel group of every rank of the test: each rank writes known
// gradients (a function of its rank, the element and the micro-batch), the units are reduced
// bucket by bucket as a backward would finish them, and what each rank is left with is checked
// against the sum over ranks computed here from those same inputs: the whole reduced gradient
// (ZeRO 0/1) or this rank's shard of it (ZeRO 2, and ZeRO-3's 1/dp shard of each unit), in fp32 and
// with the bf16 reduce. The inputs are multiples of 1/4 no larger than 2, so every sum is exact in
// bf16 as in fp32 and the checks are equalities. Units not started stay as they were.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/param_store.hpp"
#include "parallel/grad_sync.hpp"
#include "convert.hpp"
#include "test_env.hpp"

using namespace kformer;

namespace {

// Units (layers) of awkward sizes: 21, 11, 13 and 10 elements, none a multiple of 2 or 4, so that
// ZeRO pads each and the shards split tensors in the middle.
std::vector<ParamSpec> specs() {
  auto t = [](std::string name, std::int64_t rows, std::int64_t cols, int layer) {
    return ParamSpec{std::move(name), rows, cols, rows, Split::none, Init::zeros, 0.0f, false, layer};
  };
  return {t("embed", 7, 3, -1), t("l0.a", 5, 1, 0), t("l0.b", 2, 3, 0), t("l1.a", 13, 1, 1),
          t("l2.w", 3, 3, 2),   t("l2.b", 1, 1, 2)};
}

// Rank r's gradient at element i (of micro-batch `micro`): a multiple of 1/4 in [-2, 2].
float input(int r, std::int64_t i, int micro = 0) { return float((i * 7 + r * 5 + micro * 3) % 17 - 8) * 0.25f; }

std::vector<float> host_copy(const float* device, std::int64_t n) {
  std::vector<float> h(std::size_t(n), 0.0f);
  if (n > 0) copy_to_host(device, n, h.data());
  return h;
}

// Fills every element of the flat layout (padding included) with this rank's inputs, starts the
// reduction of the units whose index `started` selects, last layer first as a backward does, and
// checks each unit against the sum over ranks (started) or this rank's own inputs (not started).
void reduce_and_check(int zero, bool bf16, const std::vector<bool>& started) {
  SCOPED_TRACE("zero=" + std::to_string(zero) + (bf16 ? " bf16 reduce" : " fp32 reduce"));
  auto dp = test::world();
  const int n = dp->size(), me = dp->rank();
  // zb-h1's numerics: fp32 gradients (not sharded), with a bf16 copy that travels when bf16.
  const Numerics num =
      resolve_numerics(Precision::fp32, bf16 ? Precision::bf16 : Precision::fp32, zero, n, ScheduleKind::zb_h1);
  ParamStore params(specs(), 1, 0, dp.get(), num);
  GradSync sync(params, dp.get(), num);
  ASSERT_EQ(params.units().size(), started.size());
  ASSERT_EQ(params.grads().extent(0), std::size_t(params.size()));
  std::vector<float> mine(std::size_t(params.size()));
  for (std::int64_t i = 0; i < params.size(); ++i) mine[std::size_t(i)] = input(me, i);
  copy_to_device(mine.data(), params.size(), params.grads().data());

  for (std::size_t k = params.units().size(); k-- > 0;)
    if (started[k]) sync.unit_done(params.units()[k].layer);
  sync.finish();

  const std::vector<float> got = host_copy(params.grads().data(), params.size());
  for (std::size_t k = 0; k < params.units().size(); ++k) {
    const ParamUnit& u = params.units()[k];
    SCOPED_TRACE("unit of layer " + std::to_string(u.layer));
    if (zero >= 1) EXPECT_EQ(u.size % n, 0) << "ZeRO pads each unit to a multiple of dp";
    // What this rank keeps reduced: the whole unit, or under ZeRO-2 its 1/dp shard.
    std::int64_t lo = u.offset, hi = u.offset + u.size;
    if (zero >= 2 && n > 1) {
      lo = u.offset + me * (u.size / n);
      hi = lo + u.size / n;
    }
    // Under ZeRO 1 and 2 the optimizer reads this rank's shard (all-reduced in full or not).
    if (zero >= 1) EXPECT_EQ(params.shard_grads(k), params.grads().data() + u.offset + me * (u.size / n));
    for (std::int64_t i = u.offset; i < u.offset + u.size; ++i) {
      float sum = 0;
      for (int r = 0; r < n; ++r) sum += input(r, i);
      if (!started[k])
        ASSERT_EQ(got[std::size_t(i)], mine[std::size_t(i)]) << "element " << i << " of a unit never started changed";
      else if (i >= lo && i < hi)
        ASSERT_EQ(got[std::size_t(i)], sum) << "element " << i << " is not the sum over " << n << " ranks";
    }
  }
}

TEST(GradSync, EveryBucketSumsOverDataParallelRanks) {
  for (int zero : {0, 1, 2})
    for (bool bf16 : {false, true}) reduce_and_check(zero, bf16, {true, true, true, true});
}

// Only the units started are reduced, and nothing outside their ranges moves: the bucket
// boundaries are the units'.
TEST(GradSync, OnlyTheUnitsStartedAreReduced) {
  for (int zero : {0, 1, 2})
    for (bool bf16 : {false, true}) {
      reduce_and_check(zero, bf16, {false, true, false, true});
      reduce_and_check(zero, bf16, {true, false, true, false});
    }
}

// Each micro-batch's backward as the stages run it under a buffered store (ZeRO-3's shards, the
// bf16 gradient buffer): every unit, last first, opened (the second one twice, nested), given this
// rank's inputs of that micro-batch (indexed within the unit), closed; the last micro-batch starts
// each unit's reduction; then the wait.
void backward_micro_batches(ParamStore& params, GradSync& sync, int me, int micro_batches) {
  const auto& units = params.units();
  for (int micro = 0; micro < micro_batches; ++micro)
    for (std::size_t k = units.size(); k-- > 0;) {
      const int layer = units[k].layer;
      params.open_grads(layer);
      if (k == 1) params.open_grads(layer);  // nested: the same buffer, closed at the last close
      for (std::size_t i = units[k].first_slot; i < units[k].first_slot + units[k].n_slots; ++i) {
        const ParamSlot& s = params.slots()[i];
        const DV<float*> g = params.dv(s.spec.name);
        std::vector<float> h = host_copy(g.data(), std::int64_t(g.extent(0)));
        for (std::size_t e = 0; e < h.size(); ++e) h[e] += input(me, s.offset - units[k].offset + std::int64_t(e), micro);
        copy_to_device(h.data(), std::int64_t(h.size()), g.data());
      }
      params.close_grads(layer);
      if (k == 1) params.close_grads(layer);
      if (micro == micro_batches - 1) sync.unit_done(layer);
    }
  sync.finish();
}

// A unit's elements before its padding.
std::int64_t unpadded(const ParamStore& params, const ParamUnit& u) {
  std::int64_t real = 0;
  for (std::size_t i = u.first_slot; i < u.first_slot + u.n_slots; ++i)
    real += params.slots()[i].rows * params.slots()[i].cols;
  return real;
}

// got: a unit's elements from `first` (within the unit) on, each the sum over ranks and micro-batches
// of the inputs, 0 past `real` (the padding).
void expect_sums(const std::vector<float>& got, std::int64_t first, std::int64_t real, int n, int micro_batches) {
  for (std::size_t j = 0; j < got.size(); ++j) {
    const std::int64_t e = first + std::int64_t(j);
    float sum = 0;
    if (e < real)
      for (int r = 0; r < n; ++r)
        for (int micro = 0; micro < micro_batches; ++micro) sum += input(r, e, micro);
    ASSERT_EQ(got[j], sum) << "unit element " << e << " (element " << j << " of those checked)";
  }
}

// ZeRO-3 with sharded gradients: each micro-batch's backward opens a unit's whole gradient, adds
// to it and closes it (nested opens share it), the last close reduce-scatters it; what a rank
// keeps is the sum over ranks and micro-batches of exactly its 1/dp shard of each unit.
void shards_check(bool bf16) {
  SCOPED_TRACE(bf16 ? "bf16 reduce" : "fp32 reduce");
  auto dp = test::world();
  const int n = dp->size(), me = dp->rank(), micro_batches = 3;
  const Numerics num =
      resolve_numerics(Precision::fp32, bf16 ? Precision::bf16 : Precision::fp32, 3, n, ScheduleKind::one_f_one_b);
  ParamStore params(specs(), 1, 0, dp.get(), num);
  GradSync sync(params, dp.get(), num);
  EXPECT_EQ(params.grads_sharded(), n > 1);
  EXPECT_EQ(params.grads().extent(0), std::size_t(n > 1 ? params.size() / n : params.size()))
      << "a rank keeps 1/dp of the gradients";
  params.zero_grads();
  const auto& units = params.units();
  backward_micro_batches(params, sync, me, micro_batches);

  for (std::size_t k = 0; k < units.size(); ++k) {
    const ParamUnit& u = units[k];
    SCOPED_TRACE("unit of layer " + std::to_string(u.layer));
    const std::int64_t len = u.size / n, first = n > 1 ? me * len : 0;
    EXPECT_EQ(params.shard_grads(k), params.grads().data() + (n > 1 ? u.offset / n : u.offset));
    expect_sums(host_copy(params.shard_grads(k), n > 1 ? len : u.size), first, unpadded(params, u), n, micro_batches);
  }
}

TEST(GradShards, Zero3RankKeepsItsShardOfTheSumOverRanksAndMicroBatches) {
  shards_check(false);
  shards_check(true);
}

std::vector<float> host_copy16(kernels::bf16* device, std::int64_t n) {
  const DV<float*> wide = device_buffer<float*>("wide", n);
  kernels::convert(Exec(), wide, as_vector(device, n));
  Exec().fence();
  return host_copy(wide.data(), n);
}

// The bf16 gradient buffer (parallel.grad_reduce_dtype=bf16, ZeRO 0-2; ParamStore::grads_bf16):
// each micro-batch's backward writes a unit's fp32 gradient into an open unit buffer, the last
// close adds it into the bf16 gradient, and the units are reduced in bf16 in place; what a rank
// keeps (the whole, or under ZeRO-2 its shard) is the sum over ranks and micro-batches, exact here.
TEST(GradSync, Bf16GradientBufferSumsOverRanksAndMicroBatches) {
  auto dp = test::world();
  const int n = dp->size(), me = dp->rank(), micro_batches = 3;
  for (int zero : {0, 1, 2}) {
    SCOPED_TRACE("zero=" + std::to_string(zero));
    const Numerics num = resolve_numerics(Precision::fp32, Precision::bf16, zero, n, ScheduleKind::one_f_one_b);
    ParamStore params(specs(), 1, 0, dp.get(), num);
    GradSync sync(params, dp.get(), num);
    ASSERT_EQ(params.grads_bf16(), n > 1);
    if (n == 1) continue;  // one rank reduces nothing: fp32 gradients
    EXPECT_EQ(params.grads().extent(0), 0u) << "no fp32 gradient beside the bf16 one";
    params.zero_grads();
    const auto& units = params.units();
    backward_micro_batches(params, sync, me, micro_batches);
    for (std::size_t k = 0; k < units.size(); ++k) {
      const ParamUnit& u = units[k];
      SCOPED_TRACE("unit of layer " + std::to_string(u.layer));
      const std::int64_t len = zero >= 2 ? u.size / n : u.size, first = zero >= 2 ? u.offset + me * len : u.offset;
      if (zero >= 1) EXPECT_EQ(params.shard_grads16(k), params.grads16().data() + u.offset + me * (u.size / n));
      expect_sums(host_copy16(params.grads16().data() + first, len), first - u.offset, unpadded(params, u), n,
                  micro_batches);
    }
  }
}

}  // namespace
