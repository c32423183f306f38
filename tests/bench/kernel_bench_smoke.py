"""kformer-kernel-bench runs and reports what docs/PERFORMANCE.md reads from it.

Not a timed test: it asserts that the cases exist under their documented names, that each
carries its rate (gflops or gbps), its ceiling's rate (ceiling_gflops: the paired sgemm, or for
gemm_bf16 the paired fp32 GEMM; copy_gbps: the paired copy) and a positive vs_ceiling with
quartiles that bracket it.
Usage: kernel_bench_smoke.py BENCH
"""
import json
import math
import os
import subprocess
import sys

CASES = {  # name: (its rate, its ceiling's rate)
    "gemm/vendor/256x4096x1024": ("gflops", "ceiling_gflops"),
    "gemm/native/256x4096x1024": ("gflops", "ceiling_gflops"),
    "gemm_bf16/native/256x4096x1024": ("gflops", "ceiling_gflops"),  # ceiling: the fp32 native GEMM
    "bias_bwd/256x1024": ("gbps", "copy_gbps"),
    "residual/fwd/2048x768": ("gbps", "copy_gbps"),
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
    for name, (rate, ceiling) in CASES.items():
        b = seen.get(name)
        if b is None:
            failures.append(f"{name}: missing from the report")
            continue
        if b.get("error_occurred"):
            failures.append(f"{name}: {b.get('error_message')}")
            continue
        bad = [f"{name}: counter {key} = {b.get(key)}" for key in (rate, ceiling, "vs_ceiling", "vs_q1", "vs_q3")
               if b.get(key) is None or not math.isfinite(b[key]) or b[key] <= 0]
        failures += bad
        if not bad and not b["vs_q1"] <= b["vs_ceiling"] <= b["vs_q3"]:
            failures.append(f"{name}: median {b['vs_ceiling']} outside [{b['vs_q1']}, {b['vs_q3']}]")
        print(f"{name}: {rate}={b.get(rate):.3g} vs_ceiling={b.get('vs_ceiling'):.3g}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
