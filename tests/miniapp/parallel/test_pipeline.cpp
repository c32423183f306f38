// The pipeline executor (parallel/pipeline.hpp) on its own, with small real Stages of a tiny
// model: the world's ranks form one pipeline (pp = 1, 2 or 4), each runs its schedule (gpipe,
// 1f1b, zb-h1, and interleaved with two chunks per rank where pp > 1), and
//  - the loss and every parameter's gradient equal those of the same model run as one stage on
//    one rank (computed on every rank, without the pipeline's communication);
//  - the executor ran exactly the rank's actions, in schedule order;
//  - the data reached the right micro-batches: a forward on the first or last chunk read the
//    samples of its micro-batch (first_sample + micro * micro_batch), in schedule order;
//  - each unit's bucket hook fired once, during the last micro-batch's backward of its chunk.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "comm/views.hpp"
#include "io/data.hpp"
#include "model/model_spec.hpp"
#include "model/param_store.hpp"
#include "model/stage.hpp"
#include "parallel/pipeline.hpp"
#include "parallel/schedule.hpp"
#include "test_env.hpp"

using namespace kformer;

namespace {

constexpr int kLayers = 8, kMicroBatch = 2, kSeqLen = 8, kMicroBatches = 4;
constexpr std::int64_t kFirstSample = 40;
constexpr std::uint64_t kSeed = 99;

ModelShape tiny(Family family) {
  ModelSettings m;
  m.family = family;
  m.n_layers = kLayers;
  m.d_model = 16;
  m.n_heads = 2;
  m.n_kv_heads = family == Family::gpt ? 2 : 1;
  m.ffn_dim = 32;
  m.vocab_size = 50;
  m.max_seq_len = kSeqLen;
  return model_shape(m, 1, false);
}

std::vector<std::pair<int, int>> even_chunks(int n) {
  std::vector<std::pair<int, int>> c;
  for (int k = 0; k < n; ++k) c.emplace_back(k * kLayers / n, kLayers / n);
  return c;
}

// The random source, recording which samples each call asked for.
class RecordingData : public DataSource {
 public:
  explicit RecordingData(std::int64_t vocab) : data_(make_data_source("random", vocab, kSeed)) {}
  void fill(std::int64_t first, std::int64_t count, int seq_len, std::int32_t* out) const override {
    calls.emplace_back(first, count);
    data_->fill(first, count, seq_len, out);
  }
  std::string describe() const override { return "recording(" + data_->describe() + ")"; }
  mutable std::vector<std::pair<std::int64_t, std::int64_t>> calls;

 private:
  std::unique_ptr<DataSource> data_;
};

std::vector<float> host_copy(const float* device, std::int64_t n) {
  std::vector<float> h(std::size_t(n), 0.0f);
  if (n > 0) copy_to_host(device, n, h.data());
  return h;
}

float grad_scale() { return 1.0f / float(kMicroBatches * kMicroBatch * kSeqLen); }

struct Reference {
  std::unique_ptr<ParamStore> params;
  double loss_sum = 0;
  std::vector<float> grads;  // the flat layout of `params`
};

// The model as one stage on this rank alone: F0 B0 F1 B1 ..., nothing sent.
Reference one_stage(const ModelShape& shape) {
  Reference ref;
  ref.params = std::make_unique<ParamStore>(rank_params(shape, even_chunks(1), 1, 0), 1, 0);
  ref.params->initialize(kSeed);
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<Stage>(shape, kMicroBatch, kSeqLen, KernelChoice{}, *ref.params, nullptr,
                                           ChunkSpec{0, 1, 0, kLayers}));
  const DV<double*> sums = device_buffer<double*>("loss_sums", 2);
  stages.front()->set_loss_sums(sums);
  Pipeline pipeline(stages, make_schedule(ScheduleKind::one_f_one_b, 1, kMicroBatches, 1)[0], nullptr);
  RecordingData data(shape.vocab);
  ref.params->zero_grads();
  pipeline.run(data, kFirstSample, kMicroBatches, grad_scale(), [](int) {});
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), sums);
  ref.loss_sum = h(0);
  ref.grads = host_copy(ref.params->grads().data(), ref.params->size());
  return ref;
}

void check_schedule_run(Family family, ScheduleKind kind, int v, const Reference& ref) {
  const std::string what = std::string(family == Family::gpt ? "gpt " : "llama ") + name_of(kind);
  SCOPED_TRACE(what);
  auto pp = test::world();
  const int P = pp->size(), me = pp->rank(), S = P * v;
  const ModelShape shape = tiny(family);
  const auto chunks = even_chunks(S);
  const Schedule schedule = make_schedule(kind, P, kMicroBatches, v);
  ASSERT_EQ(check_schedule(schedule, P, kMicroBatches, v), "");
  const std::vector<Action>& actions = schedule[std::size_t(me)];

  ParamStore params(rank_params(shape, chunks, P, me), 1, 0);
  params.initialize(kSeed);
  std::vector<std::unique_ptr<Stage>> stages;
  const DV<double*> sums = device_buffer<double*>("loss_sums", 2);
  for (int c = me; c < S; c += P) {
    stages.push_back(std::make_unique<Stage>(shape, kMicroBatch, kSeqLen, KernelChoice{}, params, nullptr,
                                             ChunkSpec{c, S, chunks[std::size_t(c)].first, chunks[std::size_t(c)].second}));
    if (c == S - 1) stages.back()->set_loss_sums(sums);
  }
  Pipeline pipeline(stages, actions, pp.get());
  const bool split = splits_backward(kind);
  const Phase last_phase = split ? Phase::weight : Phase::backward;

  // The bucket hook: which unit, and how many backward (or W) actions of its chunk had already
  // finished when it fired.
  auto chunk_of = [&](int layer) {
    if (layer == kLayers) return S - 1;
    if (layer < 0) return me == 0 ? 0 : S - 1;  // the embedding, or the last stage's tied copy
    for (int c = 0; c < S; ++c)
      if (layer >= chunks[std::size_t(c)].first && layer < chunks[std::size_t(c)].first + chunks[std::size_t(c)].second)
        return c;
    return -1;
  };
  std::vector<int> fired;
  std::vector<int> done_before;
  const auto on_unit_done = [&](int layer) {
    fired.push_back(layer);
    const int c = chunk_of(layer);
    done_before.push_back(int(std::count_if(pipeline.spans.begin(), pipeline.spans.end(), [&](const ActionSpan& s) {
      return !s.head && s.chunk == c && s.phase == last_phase;
    })));
  };

  RecordingData data(shape.vocab);
  params.zero_grads();
  pipeline.run(data, kFirstSample, kMicroBatches, grad_scale(), on_unit_done);

  // The actions ran in schedule order (the head's backward inside the last chunk's forward is
  // drawn as a span of its own).
  std::vector<Action> ran;
  for (const auto& s : pipeline.spans)
    if (!s.head) ran.push_back({s.phase, s.micro, s.chunk});
  EXPECT_EQ(ran, actions) << "the executor did not run this rank's actions in order";

  // The samples each forward read: its micro-batch's, wherever its chunk sits.
  std::vector<std::pair<std::int64_t, std::int64_t>> expected_fills;
  for (const Action& a : actions)
    if (a.phase == Phase::forward && (a.chunk == 0 || a.chunk == S - 1))
      expected_fills.emplace_back(kFirstSample + std::int64_t(a.micro) * kMicroBatch, kMicroBatch);
  EXPECT_EQ(data.calls, expected_fills) << "a forward read another micro-batch's samples";

  // Each unit this rank holds fired once, in the last micro-batch's backward of its chunk.
  std::vector<int> units;
  for (const auto& u : params.units()) units.push_back(u.layer);
  std::vector<int> sorted = fired;
  std::sort(sorted.begin(), sorted.end());
  std::sort(units.begin(), units.end());
  EXPECT_EQ(sorted, units) << "each unit's bucket must start exactly once per iteration";
  for (std::size_t k = 0; k < fired.size(); ++k)
    EXPECT_EQ(done_before[k], kMicroBatches - 1) << "unit of layer " << fired[k] << " fired before its last micro-batch";

  // The loss over the pipeline (only the last chunk has it) and every gradient, summed over the
  // pipeline's ranks into the one-stage layout (the tied table's two parts add up as the
  // trainer's tied-embedding sum would), against the one-stage run. Measured on the OpenMP build:
  // the loss and every gradient bitwise equal, but gpt's tied table (its two parts summed in
  // another order), 1.1e-7 of its largest gradient; the bound is 1e-6.
  const DV<float*> grads = device_buffer<float*>("grads_in_one_stage_layout", ref.params->size());
  for (const auto& s : params.slots()) {
    const std::int64_t n = s.rows * s.cols, at = ref.params->slot(s.spec.name).offset;
    Kokkos::deep_copy(Kokkos::subview(grads, std::make_pair(at, at + n)), as_vector(params.grads().data() + s.offset, n));
  }
  comm::allreduce(*pp, grads, grads, comm::ReduceOp::sum);
  comm::allreduce(*pp, sums, sums, comm::ReduceOp::sum);
  auto loss = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), sums);
  EXPECT_NEAR(loss(0), ref.loss_sum, 1e-6 * std::abs(ref.loss_sum)) << "the loss differs from the one-stage run";
  const std::vector<float> got = host_copy(grads.data(), ref.params->size());
  for (const auto& s : ref.params->slots()) {
    float scale = 0, worst = 0;
    std::int64_t at = -1;
    for (std::int64_t i = s.offset; i < s.offset + s.rows * s.cols; ++i) scale = std::max(scale, std::abs(ref.grads[std::size_t(i)]));
    for (std::int64_t i = s.offset; i < s.offset + s.rows * s.cols; ++i) {
      const float d = std::abs(got[std::size_t(i)] - ref.grads[std::size_t(i)]);
      if (d > worst) worst = d, at = i - s.offset;
    }
    EXPECT_LE(worst, 1e-6f * scale + 1e-12f) << s.spec.name << ": gradient differs from the one-stage run at element "
                                             << at << " (largest |gradient| " << scale << ")";
  }
}

TEST(Pipeline, EveryScheduleMatchesOneStage) {
  const int P = test::world()->size();
  for (Family family : {Family::gpt, Family::llama}) {
    const Reference ref = one_stage(tiny(family));
    EXPECT_GT(ref.loss_sum, 0);
    for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1})
      check_schedule_run(family, kind, 1, ref);
    if (P > 1) check_schedule_run(family, ScheduleKind::interleaved, 2, ref);
  }
}

}  // namespace
