// Pipeline schedules as data: for each pipeline rank, the ordered list of actions (forward or
// backward of micro-batch m on model chunk c) that one executor runs. The model is cut into
// S = pp * v chunks; rank r holds chunks r, r + pp, ... (Megatron's interleaving; v = 1: chunk r).
// A new schedule is a new list; check_schedule() proves a list valid without running ranks.
#pragma once

#include <string>
#include <vector>

namespace kformer {

enum class Phase { forward, backward };

struct Action {
  Phase phase;
  int micro;  // micro-batch
  int chunk;  // global model chunk, 0 .. pp*v-1
  bool operator==(const Action& o) const { return phase == o.phase && micro == o.micro && chunk == o.chunk; }
};

using Schedule = std::vector<std::vector<Action>>;  // [pipeline rank] -> actions in order

// kind: "gpipe", "1f1b" or "interleaved" (v chunks per rank; m must be a multiple of pp).
Schedule make_schedule(const std::string& kind, int pp, int m, int v);

// Every (micro, chunk) forwarded and backwarded exactly once, each forward before its backward on
// its rank, and a simulation with FIFO channels between ranks (messages between a pair are
// matched in posting order, as the Communicator promises) in which every receive finds its
// message and no rank waits forever. Returns "" when valid, else what is wrong.
std::string check_schedule(const Schedule& s, int pp, int m, int v);

// The idle fraction of the ideal pipeline: (p-1)/(m+p-1), and (p-1)/(v*m+p-1) interleaved.
double analytic_bubble(int pp, int m, int v);

}  // namespace kformer
