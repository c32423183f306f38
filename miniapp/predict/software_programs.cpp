// The costed software's pipeline programs (see software_programs.hpp).
#include "predict/software_programs.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <tuple>
#include <vector>

namespace kformer::predict {

Program one_call_a_step(const Program& program, int rank, int pp) {
  Program out;
  for (const Step& s : program) {
    // The gradient's receive goes first where DeepSpeed's backward step holds both: after F_i it
    // receives B_j's gradient with j = i - (pp - rank - 1), 1F1B's steady state. Elsewhere (the
    // warm-up's last forward of a short pipeline) that receive is in a later step: sends first.
    const auto steady = [&](const Message& grad) {
      for (const Message& m : s.group)
        if (m.send && m.phase == Phase::forward && m.micro - grad.micro == pp - rank - 1) return true;
      return false;
    };
    const auto order = [&](const Message& m) {
      if (!m.send && m.phase != Phase::forward) return steady(m) ? 0 : 2;
      return m.send ? 1 : 3;  // sends (a gradient's and an activation's) before the activation's receive
    };
    std::vector<Message> calls = s.group;
    std::stable_sort(calls.begin(), calls.end(), [&](const Message& a, const Message& b) { return order(a) < order(b); });
    for (const Message& m : calls) out.push_back({{m}, true, std::nullopt});
    if (s.action) out.push_back({{}, false, s.action});
  }
  return out;
}

Program prefetched_program(const Program& program) {
  std::vector<Action> actions;
  std::map<std::tuple<int, int, int>, std::size_t> index;  // (phase, micro, chunk) -> action
  for (const Step& s : program)
    if (s.action) index[{int(s.action->phase), s.action->micro, s.action->chunk}] = actions.size(), actions.push_back(*s.action);
  // a send to the action that made it, a receive to the one that reads it
  std::vector<std::vector<Message>> sends(actions.size()), receives(actions.size());
  for (const Step& s : program)
    for (const Message& m : s.group) (m.send ? sends : receives)[index.at({int(m.phase), m.micro, m.chunk})].push_back(m);
  std::vector<std::vector<Message>> after(actions.size() + 1);  // posted after action i - 1 (0: before the first)
  for (std::size_t i = 0; i < actions.size(); ++i) {
    std::size_t at = i;
    for (std::size_t j = i; j-- > 0;)
      if (actions[j].phase == actions[i].phase) {
        at = j + 1;
        break;
      }
    after[at].insert(after[at].end(), receives[i].begin(), receives[i].end());
  }
  Program out;
  for (std::size_t i = 0; i <= actions.size(); ++i) {
    Step step;
    if (i > 0) step.group = sends[i - 1];
    step.group.insert(step.group.end(), after[i].begin(), after[i].end());
    if (i < actions.size()) step.action = actions[i];
    if (step.action || !step.group.empty()) out.push_back(std::move(step));
  }
  return out;
}

}  // namespace kformer::predict
