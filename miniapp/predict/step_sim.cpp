// One predicted training step (see step_sim.hpp).
#include "predict/step_sim.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>

#include "model/model_spec.hpp"
#include "parallel/schedule.hpp"
#include "predict/chunk_work.hpp"
#include "predict/kernel_costs.hpp"
#include "predict/software_programs.hpp"
#include "train/step_work.hpp"

namespace kformer::predict {
namespace {

struct Layout {
  int tp, pp, dp, world, zero, m, v;
  int stage(int w) const { return w / (dp * tp); }
};

}  // namespace

StepPrediction predict_step(const RunPlan& plan, const MachineProfile& prof, bool record) {
  const RunSettings& cfg = plan.settings;
  const ParallelSettings& par = cfg.parallel;
  Layout l{par.tp, par.pp, par.dp, 0, par.zero, par.microbatches, par.virtual_stages};
  l.world = l.tp * l.pp * l.dp;
  const NetworkCost net(prof, {cfg.comm.latency_us, cfg.comm.bandwidth_gbps});
  const BlockDims& d = plan.dims;
  const auto& layers = plan.chunks;
  const int S = int(layers.size());

  PipelineSetup ps;
  ps.pp = l.pp, ps.n_chunks = S, ps.microbatches = l.m;
  const Schedule& sched = plan.schedule;
  std::vector<PhaseLogs> phases;  // each stage's phases after its pipeline, described once (its first replica's)
  for (int r = 0; r < l.pp; ++r) {
    ps.programs.push_back(comm_program(sched[r], l.pp, S));
    if (cfg.predict.pipeline_calls == PipelineCalls::one_by_one) ps.programs.back() = one_call_a_step(ps.programs.back(), r, l.pp);
    if (cfg.predict.pipeline_p2p == PipelineP2p::prefetched) ps.programs.back() = prefetched_program(ps.programs.back());
    phases.push_back(describe_phases(plan, {r, 0, 0}));
  }
  for (int c = 0; c < S; ++c) ps.chunks.push_back(chunk_work(prof, plan, c));
  // The bytes of the calls that travel as the store makes them: each unit's bucket as its done
  // hook posts it, each ZeRO-3 unit's gather as its chunk's require does (the first require of a
  // unit in a chunk's described forward gathers it).
  ps.gather_bytes.assign(l.pp, {});
  for (int r = 0; r < l.pp; ++r) ps.bucket_bytes.push_back(phases[r].buckets);
  for (int c = 0; c < S; ++c)
    for (const WorkItem& i : ps.chunks[c].forward)
      if (i.kind == ItemKind::require && i.bytes > 0) ps.gather_bytes[c % l.pp][i.layer] = i.bytes;
  // A chunk's activation or its gradient as it travels: this rank's rows under sequence
  // parallelism, its 1/tp of them split over TP without; bf16 in mixed precision (the receivers'
  // TP all-gather is in the chunks' work).
  const double element = cfg.bf16() ? 2.0 : 4.0;
  ps.message_bytes = element * d.message_rows() * d.C;
  // DeepSpeed before 0.5.4 (predict.pipeline_messages): every TP rank sends the whole gradient
  if (cfg.predict.pipeline_messages == PipelineMessages::partitioned_whole_grads)
    ps.grad_message_bytes = element * d.rows() * d.C;
  ps.fsdp = plan.numerics.shards_values;
  ps.dp_buckets = l.dp > 1;
  ps.one_stream = prof.one_stream;
  ps.serial_p2p = cfg.predict.pipeline_p2p == PipelineP2p::serialized;
  ps.prefetch_receives = cfg.predict.pipeline_p2p == PipelineP2p::prefetched;
  ps.tp_overlap = cfg.predict.tp_comm == Overlap::overlapped;
  ps.tp_input_grad = cfg.predict.tp_input_grad == Overlap::overlapped;
  ps.fsdp_grads = plan.numerics.shards_grads;
  // Megatron-Core's 1F1B: all but the first stage launch their buckets after their pipeline; its
  // interleaved schedule, a chunk's pipeline-rank backward steps after the chunk's last backward.
  ps.delay_buckets = cfg.predict.grad_reduce == GradReduce::delayed;
  ps.gather_prefetch = cfg.predict.zero3_gather == Overlap::overlapped;
  ps.tp = {l.tp, 1}, ps.dp = {l.dp, l.tp}, ps.pp_group = {l.pp, l.tp * l.dp};
  // Each stage's pipeline begins after its prepare phase: kernels only, on the rank's own data.
  std::map<std::string, double> kernels0;  // rank 0's compute by family, in us (its prepare phase's first)
  for (int r = 0; r < l.pp; ++r) {
    double us = 0;
    for (const WorkEntry& e : phases[r].before.entries) {
      if (e.kind == WorkEntry::Kind::comm)
        throw std::logic_error("predict: the described prepare phase makes a call on a group; it should launch kernels only");
      if (e.kind != WorkEntry::Kind::kernel) continue;
      const double k = kernel_us(prof, e.call, call_costs(cfg));
      us += k;
      if (r == 0) kernels0[kernels::family_name(e.call.family)] += k;
    }
    ps.start_us.push_back(us);
  }
  const std::vector<StageTimeline> st = simulate_pipeline(ps, net, record);
  for (const auto& [family, us] : st[0].kernel_us) kernels0[family] += us;

  // Per world rank from here: clocks, exposed and in-flight communication, busy time.
  const GroupShape world{l.world, 1};
  std::vector<double> t(l.world), exposed(l.world), commt(l.world), busy(l.world), opt(l.world), opt_start(l.world);
  std::vector<std::vector<std::pair<double, double>>> extra(l.world);  // comm intervals after the pipeline
  std::vector<std::vector<const char*>> extra_name(l.world);           // and their calls, for the trace
  const int straggler = cfg.straggler.rank;
  const double slowdown = cfg.straggler.slowdown;
  for (int w = 0; w < l.world; ++w) {
    const StageTimeline& x = st[l.stage(w)];
    t[w] = x.wall_us;
    busy[w] = x.forward_us + x.backward_us;
    if (w == straggler && slowdown > 1)  // it sleeps, then waits for a core
      t[w] += (slowdown - 1) * busy[w] + prof.wakeup_us, busy[w] *= slowdown;
    busy[w] += x.start_us;  // the prepare phase's kernels (a straggler's stretch is the pipeline's, as the trainer's)
  }
  // A blocking collective over the members: all leave at the latest arrival plus its cost, and
  // each no earlier than its own arrival plus the emulated time.
  // hidden_us: how much of it runs beside the next iteration's work instead (predict.param_gather).
  const auto collective = [&](const std::vector<int>& members, comm::OpKind kind, double bytes, GroupShape g,
                              double hidden_us) {
    if (g.size <= 1) return;
    double arrive = 0;
    for (int w : members) arrive = std::max(arrive, t[w]);
    bool skewed = false;  // someone waited for a later member: that one's wake-up, else a joint entry's
    for (int w : members) skewed |= t[w] < arrive;
    // The part hidden beside the forward slows it by the SMs the collective holds (f * its time).
    const double real = net.real_us(kind, bytes, g);
    const double shown = hidden_us > 0 ? shown_beside_us(real, hidden_us, net.compute_share_lost(g)) : real;
    const double real_end = arrive + shown + (skewed ? net.wakeup_us(g.size) : net.sync_wakeup_us(g.size));
    const double emu = net.emulated_us(kind, bytes, g.size);
    for (int w : members) {
      const double end = std::max(real_end, t[w] + emu);
      exposed[w] += end - t[w], extra[w].push_back({t[w], end}), t[w] = end;
      extra_name[w].push_back(comm::op_name(kind));
    }
  };
  const auto group_of = [&](int w, GroupShape g) {
    std::vector<int> m;
    const int base = w - ((w / g.stride) % g.size) * g.stride;
    for (int i = 0; i < g.size; ++i) m.push_back(base + i * g.stride);
    return m;
  };
  const auto for_groups = [&](GroupShape g, const std::function<void(const std::vector<int>&)>& f) {
    for (int w = 0; w < l.world; ++w)
      if ((w / g.stride) % g.size == 0) f(group_of(w, g));
  };

  // predict.bucket_pass=scale: Megatron-LM's DDP of 2022 divides its fp32 gradient buffer by DP after
  // the pipeline, before reducing it, at DP 1 too (megatron/model/distributed.py, allreduce_gradients:
  // `buffer_.data /= mpu.get_data_parallel_world_size()`): the rank's whole buffer read and written
  // (unit_gradient_bytes; not under ZeRO-3, which that DDP does not run, as nan_check_scale,
  // chunk_work.cpp). Once a stage: its replicas alike.
  if (cfg.predict.bucket_pass == BucketPass::scale && !plan.numerics.shards_grads) {
    std::vector<double> stage_us(l.pp);
    for (int r = 0; r < l.pp; ++r) {
      double bytes = 0;
      for (const auto& [unit, b] : unit_gradient_bytes(plan, r)) bytes += b;
      stage_us[r] = memory_us(prof, "residual", 2 * bytes) * prof.compute_scale;
    }
    for (int w = 0; w < l.world; ++w) t[w] += stage_us[l.stage(w)], busy[w] += stage_us[l.stage(w)];
  }
  // The data-parallel buckets: reduce-scatter under ZeRO >= 2, else all-reduce, one after the
  // other, each at the non-blocking call's rate (posted together, as GradSync posts them). Where
  // the network progresses on its own (a GPU's NCCL) they run during the backward, unless
  // predict.grad_reduce=serialized; on MPI without a progress thread they move only once every
  // member waits for them. The backward beside them runs on the SMs they leave: it ends later by
  // their share of the device (compute_share_lost) times the time they overlap its compute.
  if (l.dp > 1) {
    const comm::OpKind kind = l.zero >= 2 ? comm::OpKind::reduce_scatter : comm::OpKind::allreduce;
    const bool overlap = prof.async_progress && cfg.predict.grad_reduce != GradReduce::serialized;
    for_groups(ps.dp, [&](const std::vector<int>& m) {
      const StageTimeline& x = st[l.stage(m.front())];
      double all_in = 0;
      for (int w : m) all_in = std::max(all_in, t[w]);
      double end = 0;
      std::vector<std::pair<double, double>> flying;
      for (std::size_t i = 0; i < x.buckets.size(); ++i) {
        const BucketPost& b = x.buckets[i];
        const double start = std::max(end, overlap ? b.post_us : all_in);
        end = start + net.real_us(kind, b.bytes, ps.dp, true);
        flying.push_back({start, end});
      }
      if (!x.buckets.empty()) end += net.wakeup_us(l.dp);
      const double slowed = overlap ? net.compute_share_lost(ps.dp) * overlap_us(flying, x.busy) : 0.0;
      for (int w : m) {
        t[w] += slowed, busy[w] += slowed;
        if (w == 0 && slowed > 0) kernels0[kSlowedBesideCollectives] += slowed;
        double e = std::max(end, t[w]);
        for (const BucketPost& b : x.buckets) e = std::max(e, b.post_us + net.emulated_us(kind, b.bytes, l.dp));
        if (!x.buckets.empty())
          extra[w].push_back({x.buckets.front().post_us, e}), extra_name[w].push_back(comm::op_name(kind));
        exposed[w] += e - t[w], t[w] = e;
      }
    });
  }
  // The rest of the iteration as the trainer runs it: the phases after the pipeline (grad_sync,
  // grad_norm, optimizer, metrics) described by the step program itself for each stage's first
  // replica (train/step_work.hpp describe_phases), walked by every rank of the stage in lockstep: a
  // kernel takes its cost on the profile, a call on a group waits until each member has reached
  // it, then costs as a collective (the tied embedding's all-reduce, the loss and norm reductions,
  // ZeRO's all-gathers, the per-rank table).
  const int last = (S - 1) % l.pp;
  const auto shape_of = [&](const std::string& group) -> GroupShape {
    if (group == "tp") return ps.tp;
    if (group == "dp") return ps.dp;
    if (group == "pp") return ps.pp_group;
    if (group == "world") return world;
    if (group == "tied-embedding") return {2, last * l.dp * l.tp};
    throw std::logic_error("predict: a described call on a group it does not know: '" + group + "'");
  };
  std::vector<std::vector<WorkEntry>> after(l.pp);
  for (int r = 0; r < l.pp; ++r) after[r] = std::move(phases[r].after.entries);
  std::vector<std::size_t> next(l.world, 0);
  // Eager PyTorch's host time for the optimizer's step and zero_grad (the profile's
  // eager_host.optimizer_us): the host issues its kernels ahead of the device, so the optimizer takes
  // the longer of its kernels and that time.
  const double optimizer_host_us =
      cfg.predict.host == HostCost::eager && prof.eager_host.costs(cfg.predict.host) ? prof.eager_host.optimizer_us : 0.0;
  const auto run_kernels = [&](int w) {  // up to the rank's next call on a group
    const std::vector<WorkEntry>& list = after[l.stage(w)];
    for (; next[w] < list.size() && list[next[w]].kind != WorkEntry::Kind::comm; ++next[w]) {
      const WorkEntry& e = list[next[w]];
      const bool optimizer = e.group == "kformer::optimizer";
      if (e.kind == WorkEntry::Kind::kernel) {
        const double us = kernel_us(prof, e.call, call_costs(cfg));
        t[w] += us;
        if (w == 0) kernels0[kernels::family_name(e.call.family)] += us;
      }
      if (e.kind == WorkEntry::Kind::region_begin && optimizer) opt_start[w] = t[w];
      if (e.kind == WorkEntry::Kind::region_end && optimizer) {
        const double host_extra = std::max(0.0, opt_start[w] + optimizer_host_us - t[w]);
        if (w == 0 && host_extra > 0) kernels0["eager_host"] += host_extra;  // as the passes' own (chunk_work.cpp)
        t[w] += host_extra;
        opt[w] = t[w] - opt_start[w];
      }
    }
  };
  const auto at_call = [&](int w, const WorkEntry& like) {
    const std::vector<WorkEntry>& list = after[l.stage(w)];
    return next[w] < list.size() && list[next[w]].kind == WorkEntry::Kind::comm && list[next[w]].group == like.group &&
           list[next[w]].op == like.op;
  };
  for (bool left = true; left;) {
    for (int w = 0; w < l.world; ++w) run_kernels(w);
    bool moved = false;
    left = false;
    for (int w = 0; w < l.world; ++w) {
      const std::vector<WorkEntry>& list = after[l.stage(w)];
      if (next[w] >= list.size()) continue;
      left = true;
      const WorkEntry& e = list[next[w]];
      if (e.kind != WorkEntry::Kind::comm) continue;  // moved on by a call resolved in this round
      const GroupShape g = shape_of(e.group);
      const std::vector<int> m = group_of(w, g);
      if (m.front() != w || !std::all_of(m.begin(), m.end(), [&](int v) { return at_call(v, e); })) continue;
      // ZeRO-1/2's parameter all-gather after the step, beside the next iteration's first forward
      // (Megatron-Core's --overlap-param-gather: each bucket's gather waited for by the forward
      // pre-hook of its first module) where predict.param_gather=overlapped.
      const bool beside_forward = cfg.predict.param_gather == Overlap::overlapped && e.group == "dp" &&
                                  e.op == comm::OpKind::allgather && !plan.numerics.shards_values;
      const StageTimeline& x = st[l.stage(w)];
      collective(m, e.op, e.bytes, g, beside_forward ? x.forward_us / double(l.m * l.v) : 0.0);
      for (int v : m) ++next[v];
      moved = true;
    }
    if (left && !moved)
      throw std::logic_error("predict: the described phases after the pipeline wait on a call that a group member never makes");
  }
  for (int w = 0; w < l.world; ++w) busy[w] += opt[w];

  StepPrediction p;
  p.step_ms = *std::max_element(t.begin(), t.end()) / 1e3;
  for (int w = 0; w < l.world; ++w) {
    const StageTimeline& x = st[l.stage(w)];
    auto iv = x.comm;
    iv.insert(iv.end(), extra[w].begin(), extra[w].end());
    commt[w] = union_us(iv);
    p.rank_busy_ms.push_back(busy[w] / 1e3);
    p.rank_comm_ms.push_back(commt[w] / 1e3);
    const double pipeline_us = x.wall_us - x.start_us;  // the pipeline's own time, as the trainer's timer sees it
    p.rank_bubble.push_back(pipeline_us > 0 ? 1.0 - (x.forward_us + x.backward_us) / pipeline_us : 0.0);
  }
  const StageTimeline& x0 = st[0];
  p.rank0.forward_ms = x0.forward_us / 1e3;
  p.rank0.backward_ms = x0.backward_us / 1e3;
  p.rank0.optimizer_ms = opt[0] / 1e3;
  p.rank0.comm_total_ms = commt[0] / 1e3;
  p.rank0.comm_exposed_ms = (x0.exposed_us + exposed[0]) / 1e3;
  p.rank0.pipeline_wall_ms = (x0.wall_us - x0.start_us) / 1e3;
  p.rank0.pipeline_compute_ms = (x0.forward_us + x0.backward_us) / 1e3;
  p.rank0.busy_ms = busy[0] / 1e3;
  for (const auto& [family, us] : kernels0) p.rank0_kernel_ms[family] = us / 1e3;
  for (int c = 0; c < S; c += l.pp) p.flops_rank0 += (ps.chunks[c].forward_flops + ps.chunks[c].backward_flops) * l.m;
  if (record) {
    for (int r = 0; r < l.pp; ++r) {
      const int w = r * l.dp * l.tp;
      std::vector<SimSpan> sp = st[r].spans;
      if (st[r].start_us > 0) sp.push_back({"prepare", false, 0.0, st[r].start_us, -1, -1, 0, false});
      for (std::size_t i = 0; i < extra[w].size(); ++i)
        sp.push_back({extra_name[w][i], true, extra[w][i].first, extra[w][i].second, -1, -1, 0, false});
      sp.push_back({"optimizer", false, opt_start[w], opt_start[w] + opt[w], -1, -1, 0, false});
      p.traced_ranks.push_back(w);
      p.spans.push_back(std::move(sp));
    }
  }
  return p;
}

}  // namespace kformer::predict
