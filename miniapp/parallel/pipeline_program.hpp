// The communication program of one pipeline rank, derived from its action list, and a simulator
// that proves a set of programs safe under NCCL's rules. NCCL may complete a send only once the
// peer has posted the matching receive (rendezvous), and runs every call of a process in issue
// order on one stream, the members of one group progressing together. So a rank that sends and
// then receives, facing a peer that does the same the other way, waits forever (1F1B's steady
// state: stage 0 sends F1 and waits for B0; stage 1 sends B0 and waits for F1) unless the send
// and the receive go out in one group. The program does what Megatron does
// (send_forward_recv_backward, send_backward_recv_forward): the sends an action produced go out
// in one group with the receive the next action needs, waited for before that action computes; a
// group of sends only (no receive follows) is left to complete while the rank computes on.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parallel/schedule.hpp"

namespace kformer {

// One message of the pipeline: a forward's activation or a backward's input gradient.
struct Message {
  bool send;    // else a receive
  Phase phase;  // of the action that produces (send) or consumes (receive) it
  int micro;
  int chunk;  // the local chunk whose buffer it is: the producer's (send) or the consumer's (receive)
  int peer;   // the pipeline rank at the other end
};

struct Step {
  std::vector<Message> group;    // posted as one group; empty: nothing to post
  bool wait = false;             // wait for the group before computing (it holds a receive)
  std::optional<Action> action;  // computed after; none in the last step (the last sends)
};
using Program = std::vector<Step>;

// The program of the pipeline rank that runs `actions`, on pp ranks over a model of n_chunks
// chunks (chunk c on rank c % pp): what Pipeline::run executes.
Program comm_program(const std::vector<Action>& actions, int pp, int n_chunks);

// Runs every rank's program (programs[r] for pipeline rank r) under NCCL's rules: a send and
// its receive (the k-th from a rank to a peer and the peer's k-th from it) complete together
// once both are posted and at the head of their stream; a group leaves the head when all its
// members have completed; a rank blocks where its step waits, and at the end until its stream
// is empty. compute_communicates: each compute issues collectives of its own (tensor-parallel
// all-reduces), which queue behind every call already posted, so it starts only on an empty
// stream. Checks that every message matches the one its receiver expects, that a send is posted
// after the compute producing it and a compute after the receive it needs has completed, and
// that no rank waits forever. Returns "" when all holds, else what went wrong.
std::string simulate_programs(const std::vector<Program>& programs, int n_chunks, bool compute_communicates);

}  // namespace kformer
