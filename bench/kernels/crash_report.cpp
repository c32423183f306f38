// The fatal-signal report of the kernel bench (see crash_report.hpp).
#include "crash_report.hpp"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace kformer::bench {
namespace {

char current[256] = "(none yet)";

void put(const char* s) {
  const ssize_t ignored = write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

// Only async-signal-safe calls: write, backtrace_symbols_fd (backtrace is loaded before, below).
void on_fatal(int sig) {
  put("kformer-kernel-bench: fatal signal ");
  put(sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE" : sig == SIGILL ? "SIGILL" : "SIGABRT");
  put(" in case ");
  put(current);
  put("; backtrace:\n");
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void note_case(const std::string& name) {
  const std::size_t n = std::min(name.size(), sizeof current - 1);
  std::memcpy(current, name.data(), n);
  current[n] = '\0';
}

void report_crashes() {
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, on_fatal);
}

}  // namespace kformer::bench
