// Walltime signals (see stop_signals.hpp).
#include "stop_signals.hpp"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <initializer_list>

namespace kformer {
namespace {

volatile std::sig_atomic_t g_signal = 0;

void on_signal(int sig) {
  if (g_signal != 0) {
    const char msg[] = "kformer: second signal: exiting now, without a checkpoint\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(128 + sig);
  }
  g_signal = sig;
  const char msg[] = "kformer: signal received: stopping after this iteration (a second signal exits at once)\n";
  (void)!::write(2, msg, sizeof msg - 1);
}

}  // namespace

void install_stop_signals() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaction(sig, &sa, nullptr);
}

int stop_signal() { return g_signal; }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace kformer
