// Pipeline schedules (see schedule.hpp).
#include "parallel/schedule.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace kformer {
namespace {

std::vector<Action> gpipe(int r, int m) {
  std::vector<Action> a;
  for (int i = 0; i < m; ++i) a.push_back({Phase::forward, i, r});
  for (int i = 0; i < m; ++i) a.push_back({Phase::backward, i, r});
  return a;
}

std::vector<Action> one_f_one_b(int r, int pp, int m) {
  std::vector<Action> a;
  const int warmup = std::min(pp - r - 1, m);
  for (int i = 0; i < warmup; ++i) a.push_back({Phase::forward, i, r});
  for (int i = 0; i < m - warmup; ++i) {
    a.push_back({Phase::forward, warmup + i, r});
    a.push_back({Phase::backward, i, r});
  }
  for (int i = m - warmup; i < m; ++i) a.push_back({Phase::backward, i, r});
  return a;
}

// Megatron's interleaved 1F1B: virtual steps k = 0 .. m*v-1 visit micro-batches in groups of pp,
// cycling through the rank's chunks; backwards visit the chunks in reverse.
std::vector<Action> interleaved(int r, int pp, int m, int v) {
  const int total = m * v;
  auto at = [&](int k, bool forward) {
    const int group = k / pp, local = forward ? group % v : v - 1 - group % v;
    const int micro = (k / (pp * v)) * pp + k % pp;
    return Action{forward ? Phase::forward : Phase::backward, micro, local * pp + r};
  };
  std::vector<Action> a;
  const int warmup = std::min(total, (pp - r - 1) * 2 + (v - 1) * pp);
  for (int k = 0; k < warmup; ++k) a.push_back(at(k, true));
  for (int k = 0; k < total - warmup; ++k) {
    a.push_back(at(warmup + k, true));
    a.push_back(at(k, false));
  }
  for (int k = total - warmup; k < total; ++k) a.push_back(at(k, false));
  return a;
}

// ZB-H1: 1F1B's order of forwards and input-gradient backwards B (so as many micro-batches in
// flight as 1F1B's first stage), with rank r running W of micro-batch j after its B of j + r: the
// later a stage, the longer its W waits, and those W fill the time 1F1B spends waiting for
// gradients (its cool-down on the first stages, the steady state's gaps on the last ones). With
// F = B = W the ranks go idle only for the p - 1 steps the first forward and backward need to
// cross the pipeline.
std::vector<Action> zb_h1(int r, int pp, int m) {
  std::vector<Action> a;
  for (const Action& x : one_f_one_b(r, pp, m)) {
    a.push_back(x);
    if (x.phase == Phase::backward && x.micro >= r) a.push_back({Phase::weight, x.micro - r, r});
  }
  for (int j = std::max(0, m - r); j < m; ++j) a.push_back({Phase::weight, j, r});
  return a;
}

}  // namespace

bool splits_backward(ScheduleKind kind) { return kind == ScheduleKind::zb_h1; }

Schedule make_schedule(ScheduleKind kind, int pp, int m, int v) {
  if (kind == ScheduleKind::interleaved && m % pp)
    throw std::invalid_argument("parallel.schedule=interleaved needs parallel.microbatches a multiple of parallel.pp");
  if (kind != ScheduleKind::interleaved && v != 1)
    throw std::invalid_argument("parallel.virtual_stages > 1 needs parallel.schedule=interleaved");
  Schedule s(pp);
  for (int r = 0; r < pp; ++r) switch (kind) {
      case ScheduleKind::gpipe: s[r] = gpipe(r, m); break;
      case ScheduleKind::one_f_one_b: s[r] = one_f_one_b(r, pp, m); break;
      case ScheduleKind::zb_h1: s[r] = zb_h1(r, pp, m); break;
      case ScheduleKind::interleaved: s[r] = interleaved(r, pp, m, v); break;
    }
  return s;
}

std::string check_schedule(const Schedule& s, int pp, int m, int v) {
  const int S = pp * v;
  std::set<std::tuple<int, int, int>> seen;
  bool split = false;
  for (int r = 0; r < pp; ++r) {
    std::set<std::pair<int, int>> forwarded, backwarded;
    for (const auto& a : s[r]) {
      if (a.chunk % pp != r || a.chunk >= S || a.micro < 0 || a.micro >= m) return "rank " + std::to_string(r) + " runs a chunk or micro-batch it does not hold";
      if (!seen.insert({int(a.phase), a.micro, a.chunk}).second) return "an action appears twice";
      if (a.phase == Phase::forward) forwarded.insert({a.micro, a.chunk});
      else if (a.phase == Phase::backward && !forwarded.count({a.micro, a.chunk})) return "a backward comes before its forward on rank " + std::to_string(r);
      if (a.phase == Phase::backward) backwarded.insert({a.micro, a.chunk});
      if (a.phase == Phase::weight && !backwarded.count({a.micro, a.chunk})) return "a W comes before its B on rank " + std::to_string(r);
      split = split || a.phase == Phase::weight;
    }
  }
  if (int(seen.size()) != (split ? 3 : 2) * m * S) return "not every (micro-batch, chunk) is forwarded and backwarded";
  // Simulate: a forward of chunk c > 0 receives from c-1's rank, a backward of c < S-1 from c+1's;
  // outputs go the other way. Channels are FIFO per ordered pair of ranks.
  std::map<std::pair<int, int>, std::deque<std::tuple<int, int, int>>> chan;  // (from,to) -> (phase,micro,chunk)
  std::vector<std::size_t> next(pp, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < pp; ++r) {
      if (next[r] == s[r].size()) continue;
      const Action& a = s[r][next[r]];
      if (a.phase == Phase::weight) {  // local: no message
        ++next[r], progress = true;
        continue;
      }
      const bool fwd = a.phase == Phase::forward;
      const bool needs = fwd ? a.chunk > 0 : a.chunk < S - 1;
      if (needs) {
        const int from = fwd ? (a.chunk - 1) % pp : (a.chunk + 1) % pp;
        auto& q = chan[{from, r}];
        if (q.empty()) continue;  // waits
        if (q.front() != std::make_tuple(int(a.phase), a.micro, fwd ? a.chunk - 1 : a.chunk + 1))
          return "rank " + std::to_string(r) + " would receive another message than the one it expects (order)";
        q.pop_front();
      }
      if (fwd ? a.chunk < S - 1 : a.chunk > 0) {
        const int to = fwd ? (a.chunk + 1) % pp : (a.chunk - 1 + S) % pp;
        chan[{r, to}].push_back({int(a.phase), a.micro, a.chunk});
      }
      ++next[r];
      progress = true;
    }
  }
  for (int r = 0; r < pp; ++r)
    if (next[r] != s[r].size()) return "deadlock: rank " + std::to_string(r) + " waits forever";
  for (const auto& c : chan)
    if (!c.second.empty()) return "a message is sent that nobody receives";
  return "";
}

double analytic_bubble(int pp, int m, int v) { return double(pp - 1) / (double(v) * m + pp - 1); }

double analytic_bubble(ScheduleKind kind, int pp, int m, int v) {
  return splits_backward(kind) ? double(pp - 1) / (3.0 * m + pp - 1) : analytic_bubble(pp, m, v);
}

}  // namespace kformer
