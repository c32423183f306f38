// A case that crashes the kernel bench (a signal) names itself: each case notes its name as it
// starts, and a handler for the fatal signals writes that name and a backtrace to stderr, then
// lets the signal end the process as it would have (the same exit status for gpu_perf.sh, which
// reruns the cases after it). Session 50's H200 run died of a segmentation fault in
// gelu/fwd/2048x3072 with nothing to say where. The frames are offsets into the binary: here,
// `addr2line -Cfe build/gpu-bundle/bin/kformer-kernel-bench 0xOFFSET` names the function and line of
// each (the bundle that ran, as its manifest's git hash built it).
#pragma once

#include <string>

namespace kformer::bench {

// The case now running (copied into a fixed buffer the handler can read).
void note_case(const std::string& name);

// Installs the handler for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT.
void report_crashes();

}  // namespace kformer::bench
