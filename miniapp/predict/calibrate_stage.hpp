// The check of the kernel-by-kernel model against the real thing, in `kformer calibrate`: the
// deck's whole model as one Stage (embedding, blocks, head and loss; one rank, no TP) run
// forward and backward for a sustained while, its time set against the sum of its kernels' times
// on the profile (chunk_work.hpp). The ratio is the profile's compute_scale, which predict
// applies to every kernel: what the kernels timed one at a time miss in sequence.
#pragma once

#include "kernels/kernel_choice.hpp"
#include "settings/run_settings.hpp"
#include "comm/communicator.hpp"
#include "predict/machine_profile.hpp"

namespace kformer::predict {

// Measured / modelled (with compute_scale 1) time of a forward and backward of one micro-batch.
// With `world` (calibrate under mpirun, every rank measuring at once), the ratio is the slowest
// rank's, each rank's whole model over its own kernels: a run's ranks wait for the slowest at every
// collective, and a prediction, whose ranks are alike, should go at its pace (cores of one VM need
// not run alike: one 17% slower than the other was seen here, and the faster rank's waits then
// showed as communication). Every rank returns the same figure, so all repeat alike.
double measure_compute_scale(const RunSettings& cfg, kernels::GemmImpl gemm, const MachineProfile& p,
                             comm::Communicator* world = nullptr);

}  // namespace kformer::predict
