// Pipeline schedules as data: for each pipeline rank, the ordered list of actions (forward or
// backward of micro-batch m on model chunk c) that one executor runs. The model is cut into
// S = pp * v chunks; rank r holds chunks r, r + pp, ... (Megatron's interleaving; v = 1: chunk r).
// A new schedule is a new list; check_schedule() proves a list valid without running ranks.
// ZB-H1 splits each backward into B (the input gradient, sent on) and W (the weight gradient,
// local), and defers W to fill what would be bubbles.
#pragma once

#include <string>
#include <vector>

#include "settings/choices.hpp"

namespace kformer {

// backward: the whole backward, or under zb-h1 its input-gradient part B; weight: zb-h1's W.
enum class Phase { forward, backward, weight };

struct Action {
  Phase phase;
  int micro;  // micro-batch
  int chunk;  // global model chunk, 0 .. pp*v-1
  bool operator==(const Action& o) const { return phase == o.phase && micro == o.micro && chunk == o.chunk; }
};

using Schedule = std::vector<std::vector<Action>>;  // [pipeline rank] -> actions in order

// interleaved: v chunks per rank, m a multiple of pp (else std::invalid_argument); the others v = 1.
Schedule make_schedule(ScheduleKind kind, int pp, int m, int v);

// Whether the schedule splits backward into B and W actions.
bool splits_backward(ScheduleKind kind);

// Every (micro, chunk) forwarded and backwarded exactly once (and, when any W appears, W'd once
// after its B), each forward before its backward on
// its rank, and a simulation with FIFO channels between ranks (messages between a pair are
// matched in posting order, as the Communicator promises) in which every receive finds its
// message and no rank waits forever. Returns "" when valid, else what is wrong.
std::string check_schedule(const Schedule& s, int pp, int m, int v);


// The idle fraction of the ideal pipeline: (p-1)/(m+p-1), and (p-1)/(v*m+p-1) interleaved.
double analytic_bubble(int pp, int m, int v);
// The same for a named schedule. zb-h1 with F, B and W of equal time (Qi et al.): the idle time
// is (p-1)(F+B-W) against m(F+B+W) of work, so (p-1)/(3m+p-1).
double analytic_bubble(ScheduleKind kind, int pp, int m, int v);

}  // namespace kformer
