// The timed pipeline simulation (see pipeline_sim.hpp).
#include "predict/pipeline_sim.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

namespace kformer::predict {
namespace {

// (sender, receiver, k-th message between them); with prefetch_receives the message's identity
// instead of k (message_id): its receives are posted out of the senders' order
using Key = std::tuple<int, int, int>;

constexpr int kTransformerEngineCommSms = 16;  // TE's default num_sm of its bulk and pipeline overlaps

struct SimGroup {
  int rank = 0;  // the poster
  double post_us = 0, sent = 0, received = 0;
  std::vector<Key> keys;
  std::vector<double> bytes;  // each key's message
};

struct Rank {
  std::size_t pc = 0;
  bool posted = false;
  long group = -1;  // the current step's group
  double t = 0;
  std::vector<long> pending;  // groups of sends only, completed in the background
  std::vector<std::pair<std::size_t, long>> pool;  // ZeRO-3 gathered units: (unit layer, last use)
  long clock = 0;
  // gather_prefetch: when the unit now computing began (the next gather's issue; -1 before the
  // first) and when the gather stream is free again.
  double unit_t0 = -1, gather_free = 0;
  // Where the current action stands when a call on one stream waits for a send: its part (0 the
  // list, 1 the head's backward), the next item, and when the action and the part began (-1: none).
  int part = 0;
  std::size_t item = 0;
  double action_t0 = -1, part_t0 = 0;
  // delay_buckets: each chunk's held buckets as (pass us, bytes), posted when released (release());
  // the chunk of each backward done so far where it was the chunk's last micro-batch, else -1;
  // and the chunk of the action now computing.
  std::map<int, std::vector<std::pair<double, double>>> held;
  std::vector<int> backwards_done;
  int chunk = -1;
  // prefetch_receives: the group of each receive posted, by the (phase, micro, chunk) it feeds
  std::map<std::tuple<int, int, int>, long> early;
};

class Sim {
 public:
  Sim(const PipelineSetup& s, const NetworkCost& net, bool record)
      : s_(s), net_(net), record_(record), ranks_(s.pp), out_(s.pp) {
    for (std::size_t r = 0; r < s.start_us.size() && r < ranks_.size(); ++r)
      ranks_[r].t = out_[r].start_us = s.start_us[r];
  }

  std::vector<StageTimeline> run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < s_.pp; ++r) progress |= advance(r);
    }
    for (int r = 0; r < s_.pp; ++r) {
      if (ranks_[r].pc != s_.programs[r].size())
        throw std::logic_error("predict: the pipeline simulation of rank " + std::to_string(r) + " did not finish");
      if (!ranks_[r].early.empty())
        throw std::logic_error("predict: rank " + std::to_string(r) + " received a message no action of it reads");
      for (long g : ranks_[r].pending) {
        const double end = group_end(groups_[g]);
        out_[r].comm.push_back({groups_[g].post_us, end});
        if (record_) span(r, "send", true, groups_[g].post_us, end, -1, -1, groups_[g].sent);
        ranks_[r].t = std::max(ranks_[r].t, end);
      }
      double after = 0;  // the buckets still held, by chunk (Megatron-Core's "remaining grad reductions")
      while (!ranks_[r].held.empty()) release(r, ranks_[r].held.begin()->first, after);
      out_[r].wall_us = ranks_[r].t;
    }
    return std::move(out_);
  }

 private:
  bool complete(const SimGroup& g) const {
    for (const Key& k : g.keys) {
      const auto it = posts_.find(k);
      if (it == posts_.end() || std::isnan(it->second.first) || std::isnan(it->second.second)) return false;
    }
    return true;
  }
  double group_end(const SimGroup& g) const {
    double end = g.post_us + net_.emulated_group_us(g.sent, g.received);
    for (std::size_t i = 0; i < g.keys.size(); ++i) {
      const Key& k = g.keys[i];
      const auto& p = posts_.at(k);
      // The end that posted first has been waiting for the other: it must wake up to go on.
      const bool mine_first = std::get<0>(k) == g.rank ? p.first <= p.second : p.second <= p.first;
      const double wake = mine_first ? net_.wakeup_us(2) : 0.0;
      end = std::max(end, std::max(p.first, p.second) + net_.real_us(comm::OpKind::send, g.bytes[i], s_.pp_group) + wake);
    }
    return end;
  }
  // A message's place in the FIFO between its two ranks, or with prefetch_receives its identity: the
  // phase, micro-batch and chunk of the action that reads it.
  int message_id(int r, const Message& m) {
    if (!s_.prefetch_receives)
      return m.send ? sends_[{r, m.peer}]++ : recvs_[{m.peer, r}]++;
    const bool fwd = m.phase == Phase::forward;
    const int reader = m.send ? m.chunk + (fwd ? 1 : -1) : m.chunk;
    return (int(m.phase) * s_.microbatches + m.micro) * s_.n_chunks + reader;
  }
  long make_group(int r, const std::vector<Message>& messages) {
    SimGroup g;
    g.rank = r;
    g.post_us = ranks_[r].t;
    for (const Message& m : messages) {
      const int id = message_id(r, m);
      const Key k = m.send ? Key{r, m.peer, id} : Key{m.peer, r, id};
      auto& p = posts_.emplace(k, std::make_pair(NAN, NAN)).first->second;
      (m.send ? p.first : p.second) = ranks_[r].t;
      // an activation (made and read by forwards) or its gradient (by backwards)
      const double bytes = m.phase == Phase::forward || s_.grad_message_bytes <= 0 ? s_.message_bytes : s_.grad_message_bytes;
      (m.send ? g.sent : g.received) += bytes;
      g.keys.push_back(k);
      g.bytes.push_back(bytes);
    }
    groups_.push_back(std::move(g));
    return long(groups_.size()) - 1;
  }
  // The step's group; with prefetch_receives each receive a group of its own, kept for its reader.
  void post(int r, const Step& step) {
    Rank& me = ranks_[r];
    me.group = -1;
    std::vector<Message> together;
    for (const Message& m : step.group)
      if (s_.prefetch_receives && !m.send) me.early[{int(m.phase), m.micro, m.chunk}] = make_group(r, {m});
      else together.push_back(m);
    if (!together.empty()) me.group = make_group(r, together);
  }
  // prefetch_receives: false until the receive the action reads (if any) has completed; then the
  // rank's clock moves past its end.
  bool received(int r, const Action& a) {
    Rank& me = ranks_[r];
    const auto it = me.early.find({int(a.phase), a.micro, a.chunk});
    if (it == me.early.end()) return true;
    const SimGroup& g = groups_[it->second];
    if (!complete(g)) return false;
    const double end = group_end(g);
    out_[r].comm.push_back({g.post_us, end});
    if (record_) span(r, "recv", true, g.post_us, end, a.micro, a.chunk, g.received);
    if (end > me.t) out_[r].exposed_us += end - me.t, me.t = end;
    me.early.erase(it);
    return true;
  }
  void span(int r, const std::string& name, bool comm, double a, double b, int micro, int chunk, double bytes,
            bool head = false) {
    out_[r].spans.push_back({name, comm, a, b, micro, chunk, bytes, head});
  }
  // On a profile whose calls share one stream (NCCL), a blocking call starts only after the sends
  // this rank posted before it and left in flight (sends_done). Not the prefetched ones: PyTorch
  // runs each isend and irecv outside a batch on a communicator and stream of its own pair of ranks
  // (ProcessGroupNCCL's send/recv), so a TP collective does not queue behind them.
  bool stream_free(int r, double& timer) { return !s_.one_stream || s_.prefetch_receives || sends_done(r, timer); }
  // False while one of the sends this rank left in flight waits for its receiver, else the rank's
  // clock moves past their ends (the wait is exposed communication, and part of `timer`).
  bool sends_done(int r, double& timer) {
    Rank& me = ranks_[r];
    for (long g : me.pending)
      if (!complete(groups_[g])) return false;
    for (long g : me.pending) {
      const double end = group_end(groups_[g]);
      if (end > me.t) out_[r].exposed_us += end - me.t, timer += end - me.t, me.t = end;
    }
    return true;
  }
  // Compute of `us` at the rank's clock: moves it and the timer, and records the interval and, by
  // `family`, the stage's kernel_us.
  void computed(int r, double us, double& timer, const std::string& family) {
    Rank& me = ranks_[r];
    if (us > 0) out_[r].kernel_us[family] += us;
    auto& busy = out_[r].busy;
    if (!busy.empty() && busy.back().second == me.t) busy.back().second = me.t + us;
    else if (us > 0) busy.push_back({me.t, me.t + us});
    me.t += us, timer += us;
  }
  // The compute of rank r between a and b (its recorded intervals, read from the latest back).
  double computed_between(int r, double a, double b) const {
    double total = 0;
    const auto& busy = out_[r].busy;
    for (auto it = busy.rbegin(); it != busy.rend() && it->second > a; ++it)
      total += std::max(0.0, std::min(b, it->second) - std::max(a, it->first));
    return total;
  }
  // A blocking call of `us` at the rank's clock.
  void blocking(int r, const char* name, double us, double bytes, double& timer) {
    Rank& me = ranks_[r];
    out_[r].comm.push_back({me.t, me.t + us});
    if (record_) span(r, name, true, me.t, me.t + us, -1, -1, bytes);
    me.t += us, timer += us, out_[r].exposed_us += us;
  }
  // False when its gather has to wait for the stream (nothing changed: called again later).
  bool require(int r, int layer, double miss_us, double& timer) {
    if (!s_.fsdp) return true;
    Rank& me = ranks_[r];
    for (auto& u : me.pool)
      if (u.first == std::size_t(layer + 1)) {
        u.second = ++me.clock;
        me.unit_t0 = me.t;
        return true;
      }
    if (!s_.gather_prefetch && !stream_free(r, timer)) return false;
    ++me.clock;
    const std::size_t pool = std::min(s_.gather_pool, s_.gather_bytes[r].size());
    if (me.pool.size() < pool) me.pool.push_back({std::size_t(layer + 1), me.clock});
    else *std::min_element(me.pool.begin(), me.pool.end(), [](auto& a, auto& b) { return a.second < b.second; }) =
        {std::size_t(layer + 1), me.clock};
    const double b = s_.gather_bytes[r].at(layer);
    const double us = net_.call_us(comm::OpKind::allgather, b, s_.dp);
    if (s_.gather_prefetch) {
      // Issued as the unit before this one began (or now, for the first), once the gather stream is
      // free: the rank waits only for what is left of it.
      const double start = std::max(me.unit_t0 < 0 ? me.t : me.unit_t0, me.gather_free), end = start + us;
      me.gather_free = end;
      out_[r].comm.push_back({start, end});
      if (record_) span(r, "allgather", true, start, end, -1, -1, b);
      // The unit before ran beside it on the SMs it left: that compute ends later by the gather's
      // share of the device times their overlap (the clock moves on; the gather's end does not).
      computed(r, net_.compute_share_lost(s_.dp) * computed_between(r, start, std::min(end, me.t)), timer,
               kSlowedBesideCollectives);
      if (end > me.t) out_[r].exposed_us += end - me.t, timer += end - me.t, me.t = end;
    } else {
      blocking(r, "allgather", us, b, timer);
    }
    computed(r, miss_us, timer, "zero3_gather_copy");  // the copy-out and widening on the compute stream
    me.unit_t0 = me.t;
    return true;
  }
  // The first GEMM after items[k] (after) or before it, none across another TP call; nullptr if none.
  static const WorkItem* gemm_beside(const std::vector<WorkItem>& items, std::size_t k, bool after) {
    for (std::size_t j = k; after ? j + 1 < items.size() : j > 0;) {
      j = after ? j + 1 : j - 1;
      const WorkItem& i = items[j];
      if (i.kind == ItemKind::tp_comm) return nullptr;
      if (i.kind == ItemKind::compute && i.name.rfind("matmul", 0) == 0) return &i;
    }
    return nullptr;
  }
  // The time the TP call items[k] holds the stream: all of it, or what outlasts the GEMM it runs
  // beside. With tp_overlap an all-gather's, the first GEMM after it (its reader, or in the
  // backward the input-gradient GEMM that Transformer Engine's bulk overlap runs it beside), a
  // reduce-scatter's, the last GEMM before it (its writer). Else with tp_input_grad an input
  // gradient's collective, the other half of the backward GEMM before it, a weight input's gather
  // that of the GEMM after it (a GEMM whose backward runs both products).
  double exposed_tp_us(const std::vector<WorkItem>& items, std::size_t k) const {
    const WorkItem& c = items[k];
    const double us = net_.call_us(c.op, c.bytes, s_.tp);
    if (s_.tp.size == 1) return us;
    if (s_.tp_overlap) {
      // (a pipeline message's gather on arrival is no userbuffer overlap: it stays whole)
      const bool gather = c.op == comm::OpKind::allgather && c.payload != comm::Payload::message,
                 scatter = c.op == comm::OpKind::reduce_scatter;
      const WorkItem* g = gather || scatter ? gemm_beside(items, k, gather) : nullptr;
      // Transformer Engine's userbuffers hold SMs beside the GEMM too (get_default_config in
      // module/base.py: num_sm 16 for its `pipeline` reduce-scatters in the forward and its `bulk`
      // gathers of a weight's input and reduce-scatters in the backward; `ring_exchange`, its other
      // gathers, one SM and the copy engines: nothing charged).
      const bool bulk_or_pipeline = scatter || c.payload == comm::Payload::weight_input;
      const double f = bulk_or_pipeline ? net_.held_share(kTransformerEngineCommSms) : 0.0;
      return g ? shown_beside_us(us, g->us, f) : us;
    }
    const bool input_grad = c.payload == comm::Payload::input_gradient, weight_input = c.payload == comm::Payload::weight_input;
    if (s_.tp_input_grad && (input_grad || weight_input)) {
      const WorkItem* g = gemm_beside(items, k, weight_input);
      // The GEMM runs at the SMs' share the collective leaves while it is in flight: it ends f * us
      // later unless the collective outlasts it (f: compute_share_lost).
      return g && g->half_us > 0 ? shown_beside_us(us, g->half_us, net_.compute_share_lost(s_.tp)) : us;
    }
    return us;
  }
  // Runs the list from the rank's current item; false where a call waits for the stream.
  bool work(int r, const std::vector<WorkItem>& items, bool last_micro, double& timer) {
    Rank& me = ranks_[r];
    for (; me.item < items.size(); ++me.item) {
      const WorkItem& i = items[me.item];
      switch (i.kind) {
        case ItemKind::compute: computed(r, i.us, timer, i.family.empty() ? i.name : i.family); break;
        case ItemKind::tp_comm:
          if (s_.tp.size > 1 && !stream_free(r, timer)) return false;
          blocking(r, comm::op_name(i.op), exposed_tp_us(items, me.item), i.bytes, timer);
          break;
        case ItemKind::require:
          if (!require(r, i.layer, i.us, timer)) return false;
          break;
        case ItemKind::unit_done:  // under ZeRO-3's sharded gradients the reduce-scatters are the buckets
          if (!last_micro || s_.fsdp_grads) break;
          if (s_.delay_buckets && (r > 0 || interleaved())) {  // with its pass (predict.bucket_pass), later
            me.held[me.chunk].push_back({i.us, s_.dp_buckets ? s_.bucket_bytes[r].at(i.layer) : 0.0});
            break;
          }
          computed(r, i.us, timer, "bucket_pass");  // the software's pass over the bucket before it is posted (predict.bucket_pass)
          if (s_.dp_buckets) out_[r].buckets.push_back({me.t, s_.bucket_bytes[r].at(i.layer)});
          break;
        case ItemKind::grad_scatter:
          if (s_.dp_buckets) out_[r].buckets.push_back({me.t, i.bytes});
          break;
      }
    }
    return true;
  }
  bool interleaved() const { return s_.n_chunks > s_.pp; }
  // Posts a chunk's held buckets, each after its pass on the compute stream.
  void release(int r, int chunk, double& timer) {
    const auto it = ranks_[r].held.find(chunk);
    if (it == ranks_[r].held.end()) return;
    for (const auto& [us, bytes] : it->second) {
      computed(r, us, timer, "bucket_pass");
      if (s_.dp_buckets) out_[r].buckets.push_back({ranks_[r].t, bytes});
    }
    ranks_[r].held.erase(it);
  }
  // Runs the action from where it stands; false while a call waits for the stream.
  bool compute(int r, const Action& a) {
    Rank& me = ranks_[r];
    const ChunkWork& w = s_.chunks[std::size_t(a.chunk)];
    const bool last_micro = a.micro == s_.microbatches - 1;
    if (me.action_t0 < 0) {
      double waited = 0;  // exposed, not the action's
      if (s_.prefetch_receives && !received(r, a)) return false;
      if (s_.serial_p2p && !sends_done(r, waited)) return false;
      me.action_t0 = me.part_t0 = me.t, me.part = 0, me.item = 0, me.chunk = a.chunk;
    }
    if (a.phase == Phase::forward) {
      if (me.part == 0) {
        if (!work(r, w.forward, last_micro, out_[r].forward_us)) return false;
        if (record_) span(r, "forward", false, me.part_t0, me.t, a.micro, a.chunk, 0);
        me.part = 1, me.item = 0, me.part_t0 = me.t;
      }
      if (!w.head_backward.empty()) {
        if (!work(r, w.head_backward, last_micro, out_[r].backward_us)) return false;
        if (record_) span(r, "backward", false, me.part_t0, me.t, a.micro, a.chunk, 0, true);
      }
    } else {  // B (or the whole backward), or zb-h1's deferred W
      if (!work(r, w.backward_of(a.phase == Phase::weight, last_micro), last_micro, out_[r].backward_us)) return false;
      if (record_)
        span(r, a.phase == Phase::weight ? "weight" : "backward", false, me.action_t0, me.t, a.micro, a.chunk, 0);
      if (a.phase == Phase::backward && s_.delay_buckets && interleaved()) {
        // Megatron-Core's interleaved schedule with delay_grad_reduce (forward_backward_pipelining_
        // with_interleaving, backward_step_helper): after its backward step k, rank r launches the
        // grad sync of the chunk whose last micro-batch was its backward step k - r.
        me.backwards_done.push_back(last_micro ? a.chunk : -1);
        const long j = long(me.backwards_done.size()) - 1 - r;
        if (j >= 0 && me.backwards_done[std::size_t(j)] >= 0) release(r, me.backwards_done[std::size_t(j)], out_[r].backward_us);
      }
    }
    me.action_t0 = -1;
    return true;
  }
  // Runs rank r's program until it blocks; true when it moved.
  bool advance(int r) {
    Rank& me = ranks_[r];
    bool moved = false;
    while (me.pc < s_.programs[r].size()) {
      const Step& step = s_.programs[r][me.pc];
      if (!me.posted) post(r, step), me.posted = true, moved = true;
      if (me.group >= 0) {
        const SimGroup& g = groups_[me.group];
        if (step.wait) {
          if (!complete(g)) break;
          const double end = group_end(g);
          out_[r].comm.push_back({g.post_us, end});
          if (record_) span(r, step.group.size() > 1 ? "group" : "recv", true, g.post_us, end, -1, -1, g.received);
          if (end > me.t) out_[r].exposed_us += end - me.t, me.t = end;
        } else {
          me.pending.push_back(me.group);
        }
        me.group = -1;
      }
      if (step.action && !compute(r, *step.action)) break;  // a call waits for a send on the stream
      ++me.pc, me.posted = false, moved = true;
    }
    return moved;
  }

  const PipelineSetup& s_;
  const NetworkCost& net_;
  bool record_;
  std::vector<Rank> ranks_;
  std::vector<StageTimeline> out_;
  std::vector<SimGroup> groups_;
  std::map<Key, std::pair<double, double>> posts_;  // (send post, receive post); NaN: not yet
  std::map<std::pair<int, int>, int> sends_, recvs_;
};

// Merged, sorted intervals.
std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}

}  // namespace

std::vector<StageTimeline> simulate_pipeline(const PipelineSetup& s, const NetworkCost& net, bool record) {
  return Sim(s, net, record).run();
}

double union_us(std::vector<std::pair<double, double>> v) {
  double total = 0;
  for (const auto& iv : merged(std::move(v))) total += iv.second - iv.first;
  return total;
}

double overlap_us(std::vector<std::pair<double, double>> a, std::vector<std::pair<double, double>> b) {
  const auto x = merged(std::move(a)), y = merged(std::move(b));
  double total = 0;
  for (std::size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    total += std::max(0.0, std::min(x[i].second, y[j].second) - std::max(x[i].first, y[j].first));
    (x[i].second < y[j].second ? i : j)++;
  }
  return total;
}

}  // namespace kformer::predict
