// The communication half of `kformer calibrate`, run under mpirun: for each group size (2, 4, ...
// up to the job), every collective the trainer uses (all-reduce, all-gather, reduce-scatter) and
// a point-to-point exchange between pairs, timed over message sizes from 8 B to a few MB on
// groups of consecutive ranks, with Hockney's alpha-beta fitted on nccl-tests' bus bytes
// (comm/alpha_beta.hpp). All ranks of a job on one node: the fits are the intra-node link class.
// Collective over `world`; the result is meaningful on rank 0.
#pragma once

#include "comm/communicator.hpp"
#include "predict/machine_profile.hpp"

namespace kformer::predict {

void calibrate_comm(comm::Communicator& world, MachineProfile& p);

}  // namespace kformer::predict
