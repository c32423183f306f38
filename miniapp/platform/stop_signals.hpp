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
// Test hook: with KFORMER_TEST_SIGNAL_HOLD_S=SECONDS in the environment, a rank that has received
// a stop signal waits here up to SECONDS before going on (a second signal ends it at once, as
// anywhere), so a test's second signal cannot race the end of the iteration on a fast machine.
// Without the variable, or without a signal, it returns at once.
void hold_after_signal_for_test();

}  // namespace kformer
