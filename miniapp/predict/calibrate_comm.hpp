// The communication half of `kformer calibrate`, run under mpirun: for each group size (2, 4, ...
// up to the job), every collective the trainer uses (all-reduce, all-gather, reduce-scatter) and
// a point-to-point exchange between pairs, timed over message sizes from 8 B to a few MB on
// groups of consecutive ranks, with Hockney's alpha-beta fitted on nccl-tests' bus bytes
// (comm/alpha_beta.hpp). All ranks of a job on one node: the fits are the intra-node link class.
// Collective over `world`; the result is meaningful on rank 0. The wake-ups (a hand-off to a
// waiting rank, a joint entry) are repeated until their repeats agree (measure/stable_figure.hpp).
#pragma once

#include "comm/communicator.hpp"
#include "measure/stable_figure.hpp"
#include "predict/machine_profile.hpp"

namespace kformer::predict {

struct CommStability {  // the pairs' wake-ups, as every rank sees them (agreed: on every pair)
  StableFigure wakeup, sync_wakeup;
};

// `wakeups`: what their repeats must agree within.
CommStability calibrate_comm(comm::Communicator& world, MachineProfile& p, const Agreement& wakeups);

}  // namespace kformer::predict
