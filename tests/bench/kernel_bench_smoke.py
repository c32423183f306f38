"""kformer-kernel-bench runs and reports what docs/PERFORMANCE.md reads from it.

Not a timed test: it asserts that the cases exist under their documented names, that each
carries finite gflops/gbps counters and a positive vs_ceiling, and that a GEMM case's paired
ceiling comes with quartiles that bracket its median. Usage: kernel_bench_smoke.py BENCH
"""
import json
import math
import os
import subprocess
import sys

CASES = {
    "gemm/vendor/256x4096x1024": ("gflops", True),
    "gemm/native/256x4096x1024": ("gflops", True),
    "bias_bwd/256x1024": ("gbps", False),
    "residual/fwd/2048x768": ("gbps", False),
}


def main(bench):
    env = dict(os.environ, OMP_NUM_THREADS="2", OMP_PROC_BIND="false")
    pattern = "^(" + "|".join(CASES) + ")/"
    out = subprocess.run([bench, "--benchmark_filter=" + pattern, "--benchmark_format=json"],
                         env=env, check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    if report["context"].get("blas") == "none":
        print("no vendor BLAS in this build: vendor cases are skipped")
        return 77
    seen = {}
    for b in report["benchmarks"]:
        seen[b["name"].split("/min_time")[0]] = b
    failures = []
    for name, (rate, paired) in CASES.items():
        b = seen.get(name)
        if b is None:
            failures.append(f"{name}: missing from the report")
            continue
        if b.get("error_occurred"):
            failures.append(f"{name}: {b.get('error_message')}")
            continue
        for key in [rate, "vs_ceiling"] + (["ceiling_gflops", "vs_q1", "vs_q3"] if paired else []):
            v = b.get(key)
            if v is None or not math.isfinite(v) or v <= 0:
                failures.append(f"{name}: counter {key} = {v}")
        if paired and not failures and not b["vs_q1"] <= b["vs_ceiling"] <= b["vs_q3"]:
            failures.append(f"{name}: median {b['vs_ceiling']} outside [{b['vs_q1']}, {b['vs_q3']}]")
        print(f"{name}: {rate}={b.get(rate):.3g} vs_ceiling={b.get('vs_ceiling'):.3g}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
