// The pipeline executor (see pipeline.hpp).
#include "parallel/pipeline.hpp"

#include "platform/profiling_region.hpp"

#include <Kokkos_Timer.hpp>

#include <algorithm>

#include "comm/trace_log.hpp"
#include "comm/views.hpp"

namespace kformer {

Pipeline::Pipeline(std::vector<std::unique_ptr<Stage>>& stages, const std::vector<Action>& actions,
                   comm::Communicator* pp)
    : stages_(stages), pp_(pp), pp_size_(pp ? pp->size() : 1),
      program_(comm_program(actions, pp_size_, stages.front()->chunk().n_chunks)),
      split_(std::any_of(actions.begin(), actions.end(), [](const Action& a) { return a.phase == Phase::weight; })) {}

// Posts the step's group: one message as the plain call (the trace names it send or recv), several
// as one group, which NCCL progresses together so that crossing sends and receives cannot wait
// on each other.
void Pipeline::exchange(const Step& step) {
  if (step.group.empty()) return;
  std::vector<comm::Op> ops;
  std::vector<SlotRef> sent;
  for (const Message& m : step.group) {
    Stage& st = stage_of(m.chunk);
    if (m.send) {
      ops.push_back(st.message(m.phase == Phase::forward, true, m.micro, m.peer));
      sent.push_back({&st, m.micro});
      if (m.phase == Phase::backward && !split_) finished_.push_back({&st, m.micro});  // the slot's last use
    } else {
      // A forward's receive takes the micro-batch's slot; a backward's lands in the slot it has.
      ops.push_back(st.message(m.phase == Phase::forward, false, m.micro, m.peer));
    }
  }
  const comm::Op& op = ops.front();
  if (step.wait) {
    if (ops.size() == 1) {
      if (op.kind == comm::OpKind::send) pp_->send(op.send, op.count, op.type, op.peer);
      else pp_->recv(op.recv, op.count, op.type, op.peer);
    } else {
      const double t0 = comm::TraceLog::now_us();
      pp_->group(ops);
      group_wait_ms += (comm::TraceLog::now_us() - t0) / 1e3;
    }
    release_finished();
  } else {
    comm::Request r = ops.size() > 1                     ? pp_->igroup(ops)
                      : op.kind == comm::OpKind::send ? pp_->isend(op.send, op.count, op.type, op.peer)
                                                      : pp_->irecv(op.recv, op.count, op.type, op.peer);
    pending_.push_back({std::move(r), std::move(sent)});
  }
}

void Pipeline::poll(bool wait) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (wait) it->request.wait();
    if (it->request.done() || it->request.test())
      it = pending_.erase(it);
    else
      ++it;
  }
  release_finished();
}

void Pipeline::release_finished() {
  const auto in_flight = [&](const SlotRef& s) {
    for (const auto& p : pending_)
      for (const auto& q : p.sends)
        if (q.stage == s.stage && q.micro == s.micro) return true;
    return false;
  };
  auto keep = std::remove_if(finished_.begin(), finished_.end(), [&](const SlotRef& s) {
    if (in_flight(s)) return false;
    s.stage->release(s.micro);
    return true;
  });
  finished_.erase(keep, finished_.end());
}

void Pipeline::run(const DataSource& data, std::int64_t first_sample, int microbatches, float grad_scale,
                   const std::function<void(int)>& on_unit_done) {
  const ProfilingRegion region("kformer::pipeline");
  Kokkos::Timer wall;
  spans.clear();
  compute_ms = group_wait_ms = 0;
  for (auto& s : stages_) s->forward_ms = s->backward_ms = 0;
  const int B = stages_.front()->dims().B, T = stages_.front()->dims().T;
  std::vector<std::int32_t> tokens(std::size_t(B) * (T + 1));

  for (const Step& step : program_) {
    poll(false);
    exchange(step);
    if (!step.action) continue;
    const Action& a = *step.action;
    Stage& st = stage_of(a.chunk);
    const ChunkSpec& c = st.chunk();
    if (a.phase == Phase::forward) {
      if (c.first()) st.input(a.micro);  // no receive took the slot
      if (c.first() || c.last()) data.fill(first_sample + std::int64_t(a.micro) * B, B, T, tokens.data());
      const double t0 = comm::TraceLog::now_us();
      st.forward(a.micro, tokens, grad_scale);
      const double t1 = comm::TraceLog::now_us(), split = st.head_backward_start_us;
      // The last chunk's forward call ends with the loss gradient and the head's backward: drawn
      // as the backward span it is (the stage counts it as backward time too).
      spans.push_back({a.phase, a.micro, a.chunk, t0, split >= 0 ? split : t1});
      if (split >= 0) spans.push_back({Phase::backward, a.micro, a.chunk, split, t1, true});
    } else {
      const double t0 = comm::TraceLog::now_us();
      const auto done = a.micro == microbatches - 1 ? on_unit_done : std::function<void(int)>();
      if (a.phase == Phase::weight) st.backward_weight(a.micro, done);
      else if (split_) st.backward_input(a.micro);
      else st.backward(a.micro, done);
      spans.push_back({a.phase, a.micro, a.chunk, t0, comm::TraceLog::now_us()});
      // The slot's last use: W when the backward is split, else the first chunk's backward (no
      // gradient goes back from it; other chunks' slots are freed once their gradient is sent).
      if (a.phase == Phase::weight || (c.first() && !split_)) finished_.push_back({&st, a.micro});
    }
    release_finished();
  }
  poll(true);
  for (auto& s : stages_) compute_ms += s->forward_ms + s->backward_ms;
  wall_ms = wall.seconds() * 1e3;
}

}  // namespace kformer
