// Walltime signals. PBS and Slurm send SIGTERM (or, asked for with `--signal`, SIGUSR1) some time
// before killing a job: the first SIGTERM, SIGUSR1 or SIGINT only raises a flag, which the trainer
// shares among the ranks at the end of the iteration, so every rank stops after the same
// iteration, saves a checkpoint (with checkpoint.save) and exits 0. A second signal ends the
// process at once.
#pragma once

namespace kformer {

void install_stop_signals(int rank);  // rank: named in the lines the handler writes
int stop_signal();  // the first signal received, 0 if none
const char* signal_name(int sig);

}  // namespace kformer
