// Walltime signals (see stop_signals.hpp).
#include "platform/stop_signals.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <thread>

namespace kformer {
namespace {

volatile std::sig_atomic_t g_signal = 0;
// The handler's lines, made before any signal: a handler may only write().
char g_first[3][160], g_second[3][160];

int slot(int sig) { return sig == SIGTERM ? 0 : sig == SIGUSR1 ? 1 : 2; }

void on_signal(int sig) {
  const char* msg = g_signal != 0 ? g_second[slot(sig)] : g_first[slot(sig)];
  (void)!::write(2, msg, std::strlen(msg));
  if (g_signal != 0) ::_exit(128 + sig);
  g_signal = sig;
}

}  // namespace

void install_stop_signals(int rank) {
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) {
    std::snprintf(g_first[slot(sig)], sizeof g_first[0],
                  "kformer: rank %d got %s: stopping after this iteration (a second signal exits at once)\n", rank,
                  signal_name(sig));
    std::snprintf(g_second[slot(sig)], sizeof g_second[0],
                  "kformer: rank %d got a second signal (%s): exiting now, without a checkpoint\n", rank,
                  signal_name(sig));
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaction(sig, &sa, nullptr);
}

int stop_signal() { return g_signal; }

void hold_after_signal_for_test() {
  if (g_signal == 0) return;
  const char* env = std::getenv("KFORMER_TEST_SIGNAL_HOLD_S");
  if (!env) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(env));
  // Short sleeps: the handler of the second signal ends the process during one of them.
  while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace kformer
