// The pipeline's communication program as a costed software issues it, made from kformer's own
// (comm_program, parallel/pipeline_program.hpp: each action's sends grouped with the next action's
// receive, waited for together): DeepSpeed's blocking calls one by one (predict.pipeline_calls) and
// Megatron-Core's non-blocking, prefetched receives (predict.pipeline_p2p). pipeline_sim.hpp runs them.
#pragma once

#include "parallel/pipeline_program.hpp"

namespace kformer::predict {

// predict.pipeline_calls=one_by_one: the 1F1B program of pipeline rank `rank` of pp with each message of a group a blocking call of its own (a step waited for, the
// action after the last), in the order DeepSpeed's TrainSchedule issues them
// (runtime/pipe/schedule.py: a forward step sends the gradient of the backward before it, then
// receives its activation; a backward step receives its gradient, then sends the activation of
// the forward before it).
Program one_call_a_step(const Program& program, int rank, int pp);

// predict.pipeline_p2p=prefetched, Megatron-Core's overlap_p2p_comm (schedules.py,
// forward_backward_pipelining_with_interleaving: send_forward_recv_forward after a forward,
// send_backward_recv_backward after a backward, each op non-blocking, its handle waited for before
// the next action of that phase): the same actions and messages as `program`, with every send posted
// as its action ends and each receive posted as the rank's previous action of the same phase ends
// (the first of a phase: as the action before it ends), no step waiting (PipelineSetup::prefetch_receives).
Program prefetched_program(const Program& program);

}  // namespace kformer::predict
