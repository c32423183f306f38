// The pipeline's communication program and its simulator (see pipeline_program.hpp).
#include "parallel/pipeline_program.hpp"

#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace kformer {

Program comm_program(const std::vector<Action>& actions, int pp, int n_chunks) {
  // A weight-gradient action (zb-h1's W) neither receives nor sends.
  const auto receives = [&](const Action& a) {
    return a.phase == Phase::forward ? a.chunk > 0 : a.phase == Phase::backward && a.chunk < n_chunks - 1;
  };
  const auto sends = [&](const Action& a) {
    return a.phase == Phase::forward ? a.chunk < n_chunks - 1 : a.phase == Phase::backward && a.chunk > 0;
  };
  const auto peer_in = [&](const Action& a) { return (a.phase == Phase::forward ? a.chunk - 1 : a.chunk + 1) % pp; };
  const auto peer_out = [&](const Action& a) { return (a.phase == Phase::forward ? a.chunk + 1 : a.chunk - 1) % pp; };
  // Interleaved, a rank exchanges activations and gradients with both neighbours in both
  // directions, and one group per action deadlocks (the simulator finds it at pp=2, m=4, v=2).
  // There the unit is Megatron's: a forward with the backward after it exchange once, their
  // inputs received together before the forward, their outputs sent together after the backward.
  std::size_t forwards = 0;
  while (forwards < actions.size() && actions[forwards].phase == Phase::forward) ++forwards;
  const bool pairs = n_chunks > pp && 2 * forwards != actions.size();
  Program program;
  std::vector<Message> outputs;  // of the previous unit, not posted yet
  for (std::size_t i = 0; i < actions.size();) {
    const std::size_t n = pairs && i + 1 < actions.size() && actions[i].phase == Phase::forward &&
                                  actions[i + 1].phase == Phase::backward
                              ? 2
                              : 1;
    Step first;
    first.group = std::move(outputs);
    outputs.clear();
    for (std::size_t k = i; k < i + n; ++k) {
      const Action& a = actions[k];
      if (receives(a)) first.group.push_back({false, a.phase, a.micro, a.chunk, peer_in(a)}), first.wait = true;
    }
    for (std::size_t k = i; k < i + n; ++k) {
      Step step = k == i ? std::move(first) : Step{};
      step.action = actions[k];
      program.push_back(std::move(step));
      const Action& a = actions[k];
      if (sends(a)) outputs.push_back({true, a.phase, a.micro, a.chunk, peer_out(a)});
    }
    i += n;
  }
  if (!outputs.empty()) program.push_back({std::move(outputs), false, std::nullopt});
  return program;
}

namespace {

using Key = std::tuple<int, int, int>;  // (phase, micro, chunk)
Key key(Phase phase, int micro, int chunk) { return {int(phase), micro, chunk}; }

std::string describe(const Message& m) {
  return std::string(m.send ? "send of " : "receive of ") + (m.phase == Phase::forward ? "F" : "B") +
         std::to_string(m.micro) + " (chunk " + std::to_string(m.chunk) + ") " + (m.send ? "to" : "from") +
         " rank " + std::to_string(m.peer);
}

std::string describe(const Action& a) {
  return std::string(a.phase == Phase::forward ? "F" : a.phase == Phase::backward ? "B" : "W") + std::to_string(a.micro) + " of chunk " +
         std::to_string(a.chunk);
}

struct Posted {
  Message m;
  int seq;  // among the messages this rank posted to (send) or from (receive) the peer
  bool done = false;
};
struct Group {
  std::vector<Posted> ops;
  std::size_t left = 0;
};

}  // namespace

std::string simulate_programs(const std::vector<Program>& programs, int n_chunks, bool compute_communicates) {
  const int pp = static_cast<int>(programs.size());
  std::vector<Group> groups;
  std::vector<std::deque<std::size_t>> stream(pp);  // posted groups not yet completed, in issue order
  std::vector<std::size_t> pc(pp, 0);               // the step each rank is at
  std::vector<bool> posted(pp, false);              // whether that step's group is posted
  std::vector<long> current(pp, -1);                // that group
  std::map<std::pair<int, int>, int> sends, recvs;  // (rank, peer) -> messages posted so far
  std::vector<std::set<Key>> computed(pp), received(pp);
  const auto rank_name = [](int r) { return "rank " + std::to_string(r); };

  for (bool progress = true; progress;) {
    progress = false;
    // Each rank's host runs on until it blocks.
    for (int r = 0; r < pp; ++r) {
      while (pc[r] < programs[r].size()) {
        const Step& s = programs[r][pc[r]];
        if (!posted[r]) {
          posted[r] = true, current[r] = -1, progress = true;
          if (!s.group.empty()) {
            Group g;
            for (const Message& m : s.group) {
              if (m.peer < 0 || m.peer >= pp || m.peer == r) return rank_name(r) + ": a " + describe(m) + " names a wrong peer";
              if (m.send && !computed[r].count(key(m.phase, m.micro, m.chunk)))
                return rank_name(r) + " posts a " + describe(m) + " before computing it";
              g.ops.push_back({m, m.send ? sends[{r, m.peer}]++ : recvs[{r, m.peer}]++});
            }
            g.left = g.ops.size();
            current[r] = long(groups.size());
            stream[r].push_back(groups.size());
            groups.push_back(std::move(g));
          }
        }
        if (s.wait && current[r] >= 0 && groups[current[r]].left > 0) break;
        if (s.action) {
          if (compute_communicates && !stream[r].empty()) break;
          const Action& a = *s.action;
          const bool fwd = a.phase == Phase::forward;
          const bool needs = fwd ? a.chunk > 0 : a.phase == Phase::backward && a.chunk < n_chunks - 1;
          if (needs && !received[r].count(key(a.phase, a.micro, a.chunk)))
            return rank_name(r) + " computes " + describe(a) + " before its input has arrived";
          computed[r].insert(key(a.phase, a.micro, a.chunk));
        }
        ++pc[r], posted[r] = false, progress = true;
      }
    }
    // Messages whose send and receive are both at the head of their ranks' streams complete.
    for (int r = 0; r < pp; ++r) {
      if (stream[r].empty()) continue;
      for (Posted& s : groups[stream[r].front()].ops) {
        if (!s.m.send || s.done || stream[s.m.peer].empty()) continue;
        for (Posted& d : groups[stream[s.m.peer].front()].ops) {
          if (d.m.send || d.done || d.m.peer != r || d.seq != s.seq) continue;
          const int expected = s.m.phase == Phase::forward ? s.m.chunk + 1 : s.m.chunk - 1;
          if (d.m.phase != s.m.phase || d.m.micro != s.m.micro || d.m.chunk != expected)
            return rank_name(s.m.peer) + "'s " + describe(d.m) + " would receive rank " + std::to_string(r) +
                   "'s " + describe(s.m) + " (order)";
          s.done = d.done = true, progress = true;
          --groups[stream[r].front()].left;
          --groups[stream[s.m.peer].front()].left;
          received[s.m.peer].insert(key(d.m.phase, d.m.micro, d.m.chunk));
          break;
        }
      }
    }
    for (int r = 0; r < pp; ++r)
      while (!stream[r].empty() && groups[stream[r].front()].left == 0) stream[r].pop_front(), progress = true;
  }
  for (int r = 0; r < pp; ++r) {
    if (pc[r] == programs[r].size() && stream[r].empty()) continue;
    std::string where = pc[r] < programs[r].size() && programs[r][pc[r]].action
                            ? "before " + describe(*programs[r][pc[r]].action)
                            : "at the end";
    std::string head = stream[r].empty() ? "nothing" : "";
    if (!stream[r].empty())
      for (const Posted& p : groups[stream[r].front()].ops)
        if (!p.done) head += (head.empty() ? "" : ", ") + describe(p.m);
    return "deadlock: " + rank_name(r) + " waits forever " + where + ", its stream blocked on " + head;
  }
  return "";
}

}  // namespace kformer
