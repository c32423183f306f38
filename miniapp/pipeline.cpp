// The pipeline executor (see pipeline.hpp).
#include "pipeline.hpp"

#include <Kokkos_Timer.hpp>

#include "comm/trace_log.hpp"

namespace kformer {

Pipeline::Pipeline(std::vector<std::unique_ptr<Stage>>& stages, std::vector<Action> actions, comm::Communicator* pp)
    : stages_(stages), actions_(std::move(actions)), pp_(pp), pp_size_(pp ? pp->size() : 1),
      pp_rank_(pp ? pp->rank() : 0) {}

void Pipeline::poll_sends(bool wait) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (wait) it->request.wait();
    if (it->request.done() || it->request.test()) {
      // A slot is released by its last pending send; a slot with a forward send still pending
      // waits for it (its backward has not run yet, so it is not marked for release).
      if (it->release) it->stage->release(it->micro);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

void Pipeline::run(const DataSource& data, std::int64_t first_sample, int microbatches, float grad_scale,
                   const std::function<void(int)>& on_unit_done) {
  Kokkos::Timer wall;
  spans.clear();
  compute_ms = 0;
  for (auto& s : stages_) s->forward_ms = s->backward_ms = 0, s->loss_sum = 0;
  const int B = stages_.front()->dims().B, T = stages_.front()->dims().T;
  std::vector<std::int32_t> tokens(std::size_t(B) * (T + 1));
  const int prev = (pp_rank_ - 1 + pp_size_) % pp_size_, next = (pp_rank_ + 1) % pp_size_;

  for (const Action& a : actions_) {
    Stage& st = stage_of(a.chunk);
    const ChunkSpec& c = st.chunk();
    poll_sends(false);
    if (a.phase == Phase::forward) {
      const DV<float**> in = st.input(a.micro);
      if (!c.first()) pp_->recv(in.data(), in.span(), comm::DType::f32, prev);
      if (c.first() || c.last()) data.fill(first_sample + std::int64_t(a.micro) * B, B, T, tokens.data());
      const double t0 = comm::TraceLog::now_us();
      st.forward(a.micro, tokens, grad_scale);
      spans.push_back({a.phase, a.micro, a.chunk, t0, comm::TraceLog::now_us()});
      if (!c.last()) {
        const DV<float**> out = st.output(a.micro);
        pending_.push_back({pp_->isend(out.data(), out.span(), comm::DType::f32, next), &st, a.micro, false});
      }
    } else {
      if (!c.last()) {
        const DV<float**> g = st.output_grad(a.micro);
        pp_->recv(g.data(), g.span(), comm::DType::f32, next);
      }
      const double t0 = comm::TraceLog::now_us();
      st.backward(a.micro, a.micro == microbatches - 1 ? on_unit_done : std::function<void(int)>());
      spans.push_back({a.phase, a.micro, a.chunk, t0, comm::TraceLog::now_us()});
      // The forward send of this slot went out long ago; wait for it before the slot can go.
      for (auto& p : pending_)
        if (p.stage == &st && p.micro == a.micro) p.request.wait();
      if (!c.first()) {
        const DV<float**> g = st.input_grad(a.micro);
        pending_.push_back({pp_->isend(g.data(), g.span(), comm::DType::f32, prev), &st, a.micro, true});
      } else {
        poll_sends(false);
        st.release(a.micro);
      }
    }
  }
  poll_sends(true);
  for (auto& s : stages_) compute_ms += s->forward_ms + s->backward_ms;
  wall_ms = wall.seconds() * 1e3;
}

}  // namespace kformer
