#!/usr/bin/env python3
"""scripts/gemm_curve.py: the fit gives back the curve a synthetic table (or calibrate profile) was made from, a
calibrate profile's fp32 outputs counted as predict counts them; --check refuses a profile whose
curve is not the fit, or with --within is further from the table's times than that; and bad input
(a missing or empty table, a profile without a bf16 curve or empty, fp32 points without a rate for
their extra bytes, no shape to fit) is one line with exit 2."""
import os
import subprocess
import sys
import tempfile

top = sys.argv[1]
script = os.path.join(top, "scripts", "gemm_curve.py")
peak, eff, half = 989.0, 0.7, 10.0


def run(*args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


with tempfile.TemporaryDirectory() as d:
    table = os.path.join(d, "t.csv")
    with open(table, "w") as f:
        f.write("# synthetic: the curve (0.7, 10 GFLOP) of a 989 TFLOP/s GPU, exactly\ngpu,b,m,n,k,bf16_flops,f32_flops\n")
        for m in (1024, 2048, 4096, 8192):
            for n in (1024, 4096):
                for k in (512, 2048, 8192):
                    fl = 2.0 * m * n * k
                    f.write(f"x,1,{m},{n},{k},{peak * 1e12 * eff * fl / (fl + half * 1e9)!r},0\n")
    r = run(table)
    assert r.returncode == 0, r.stderr
    assert "max_efficiency 0.700" in r.stdout and "half_efficiency_gflop 10.00" in r.stdout, r.stdout

    # A profile kformer calibrate wrote: its bf16 points' forward times, less its launch, are the table.
    measured = os.path.join(d, "measured.yaml")
    with open(measured, "w") as f:
        f.write("name: measured\nlaunch_us: 10\nbf16:\n  gemm:\n    peak_tflops: 500\n    max_efficiency: 1\n"
                "    half_efficiency_gflop: 1\n    points:\n")
        for m, n, k in ((8192, 4096, 4096), (8192, 1024, 4096), (4096, 2304, 6144), (2048, 2048, 2048), (8192, 14336, 4096)):
            fl = 2.0 * m * n * k
            us = 10 + fl / (peak * 1e12 * eff * fl / (fl + half * 1e9)) * 1e6
            f.write(f"      - {{m: {m}, n: {n}, k: {k}, forward_us: {us!r}, backward_us: {2 * us!r}}}\n")
    r = run(measured)
    assert r.returncode == 0 and "max_efficiency 0.700" in r.stdout and "half_efficiency_gflop 10.00" in r.stdout, r.stdout + r.stderr

    # The same GEMMs timed with fp32 outputs (calibrate's C): each point also writes 2 bytes an element more, at
    # the profile's stream rate (the copy, capped by its fastest memory-bound family: 2000 GB/s here); counted,
    # the fit is the curve again; not counted, it would be slower.
    def fp32_points(path, rates):
        with open(path, "w") as f:
            f.write(f"name: fp32\nlaunch_us: 10\n{rates}bf16:\n  gemm:\n    peak_tflops: 500\n    max_efficiency: 1\n"
                    "    half_efficiency_gflop: 1\n    output_bytes: 4\n    points:\n")
            for m, n, k in ((8192, 4096, 4096), (8192, 1024, 4096), (4096, 2304, 6144), (2048, 2048, 2048), (8192, 14336, 768)):
                fl = 2.0 * m * n * k
                us = 10 + fl / (peak * 1e12 * eff * fl / (fl + half * 1e9)) * 1e6 + m * n * 2 / (2000 * 1e3)
                f.write(f"      - {{m: {m}, n: {n}, k: {k}, forward_us: {us!r}, backward_us: {2 * us!r}}}\n")
        return path
    wide = fp32_points(os.path.join(d, "wide.yaml"), "copy_gbps: 3000\nmemory_bound: {norm: 1500, residual: 2000}\n")
    r = run(wide)
    assert r.returncode == 0 and "max_efficiency 0.700" in r.stdout and "half_efficiency_gflop 10.00" in r.stdout, r.stdout + r.stderr
    r = run(fp32_points(os.path.join(d, "no_rate.yaml"), ""))
    assert r.returncode == 2 and "no copy_gbps or memory_bound" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr

    def profile(e, h):
        p = os.path.join(d, "p.yaml")
        with open(p, "w") as f:
            f.write(f"name: x\nbf16:\n  gemm:\n    peak_tflops: {peak}\n    max_efficiency: {e}\n    half_efficiency_gflop: {h}\n")
        return p

    r = run(table, "--check", profile(0.7, 10))
    assert r.returncode == 0, r.stdout + r.stderr
    good = profile(0.7, 10)
    os.rename(good, good + ".good.yaml")
    r = run(table, "--check", good + ".good.yaml", profile(0.75, 10))  # one of two off: exit 1, named
    assert r.returncode == 1 and "p.yaml's bf16 curve" in r.stderr and "good.yaml's bf16" not in r.stderr, r.stderr
    for e, h in ((0.75, 10), (0.7, 24)):
        r = run(table, "--check", profile(e, h))
        assert r.returncode == 1, (e, h, r.stdout)
        assert "is not the fit" in r.stderr and "set it from the fit" in r.stderr, r.stderr
    # --within: the profile's curve against the table's times, not against the fit's two figures.
    r = run(table, "--check", profile(0.7, 10), "--within", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(wide, "--check", profile(0.75, 10), "--within", "5")  # 1/0.75 against 1/0.7: 6.7% fast at every shape
    assert r.returncode == 1 and "more than --within 5" in r.stderr and "6.7% off" in r.stderr, r.stdout + r.stderr
    r = run(wide, "--check", profile(0.75, 10), "--within", "8")
    assert r.returncode == 0, r.stdout + r.stderr
    # Bad input: a missing file, a table without rows, a profile without a bf16 curve.
    empty = os.path.join(d, "empty.csv")
    open(empty, "w").write("gpu,b,m,n,k,bf16_flops,f32_flops\n")
    no_curve = os.path.join(d, "q.yaml")
    open(no_curve, "w").write("name: q\n")
    blank = os.path.join(d, "blank.yaml")
    open(blank, "w").write("")
    for args in ((os.path.join(d, "missing.csv"),), (empty,), (table, "--check", no_curve), (table, "--check", blank),
                 (table, "--min-gflop", "1e9")):
        r = run(*args)
        assert r.returncode == 2, (args, r.returncode, r.stdout)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gemm_curve: cannot read the input"), r.stderr
print("gemm_curve: the fit, --check and bad input as documented")
