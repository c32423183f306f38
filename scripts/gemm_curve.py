#!/usr/bin/env python3
"""A machine profile's bf16 GEMM curve from a table of measured GEMM rates.

predict costs a GEMM of f FLOPs that no profile point names as
    launch_us + f / (peak * max_efficiency * f / (f + half_efficiency_gflop * 1e9))
(miniapp/predict/kernel_costs.cpp). This script takes a table of measured bf16 GEMMs on one GPU
(docs/data/openxla-sm90-matmul.csv: OpenXLA's 375 shapes on an H100), fits max_efficiency and
half_efficiency_gflop to the kernel times of the shapes of at least --min-gflop (least squares on
the logarithm of the time: every shape counts by its relative error), and prints them with the
fit's errors. The launch is left out of the fit: the table times kernels, predict adds its launch.
TABLE may also be a profile that `kformer calibrate` wrote on a GPU (a .yaml: its bf16.gemm.points,
each forward time less the profile's launch_us), so that kformer's own measurement, e.g. the GPU
session's calibrate/large.yaml at the H100 rows' shapes, can be set against a shipped profile. A
curve is of bf16 outputs (the tables time them); where the profile's points wrote another width
(its gemm.output_bytes: 4, calibrate's fp32 C), each time first loses the bytes of C beyond bf16's
at the profile's streaming rate, as predict charges them (kernel_costs.cpp: gemm_us, stream_gbps).

  gemm_curve.py TABLE                                 the fit
  gemm_curve.py TABLE --check PROFILE ...             exit 1 unless each PROFILE's bf16 curve is that fit
  gemm_curve.py TABLE --check PROFILE ... --within P  exit 1 unless each PROFILE's curve gives TABLE's
                                                      times within a median of P percent (a few shapes,
                                                      or all large, do not pin a fit's two figures)
"""
import argparse
import csv
import math
import sys

import yaml

MIN_GFLOP = 4.0  # below about 4 GFLOP a GEMM is a few waves of tiles: the two-figure curve does not follow them


def bf16_gemm(path):
    """A machine profile, whole, and its bf16.gemm section."""
    with open(path) as f:
        p = yaml.safe_load(f)
    g = (p.get("bf16") or {}).get("gemm")
    if not g:
        raise ValueError(f"{path}: no bf16.gemm section")
    return p, g


CURVE_OUTPUT_BYTES = 2  # a curve's timings wrote bf16 C


def stream_gbps(profile):
    """predict's rate for the bytes a GEMM's C writes beyond its timings' (kernel_costs.cpp: stream_gbps):
    the copy, capped by the fastest memory-bound family."""
    fastest = max((float(v) for v in (profile.get("memory_bound") or {}).values()), default=0.0)
    copy = float(profile.get("copy_gbps") or 0)
    return min(copy, fastest) if copy > 0 and fastest > 0 else max(copy, fastest)


def read_profile_points(path):
    profile, gemm = bf16_gemm(path)
    launch = float(profile.get("launch_us", 0))
    out = int(gemm.get("output_bytes") or CURVE_OUTPUT_BYTES)
    us_per_element = 0.0  # of C, the bytes beyond bf16's at the stream rate
    if out != CURVE_OUTPUT_BYTES:
        rate = stream_gbps(profile)
        if rate <= 0:
            raise ValueError(f"{path}: its points wrote {out}-byte outputs, and it has no copy_gbps or memory_bound "
                             "rate to take the extra bytes off at")
        us_per_element = (out - CURVE_OUTPUT_BYTES) / (rate * 1e3)
    shapes = []
    for g in gemm.get("points") or []:
        m, n, k = int(g["m"]), int(g["n"]), int(g["k"])
        us = float(g["forward_us"]) - launch - m * n * us_per_element
        if us > 0:
            shapes.append((2.0 * m * n * k, us * 1e-6))
    if not shapes:
        raise ValueError(f"{path}: no bf16.gemm.points (want a profile kformer calibrate wrote on a GPU)")
    return shapes


def read_table(path, column="bf16_flops"):
    if path.endswith((".yaml", ".yml")):
        return read_profile_points(path)
    shapes = []
    with open(path) as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        for r in rows:
            flops = 2.0 * int(r["b"]) * int(r["m"]) * int(r["n"]) * int(r["k"])
            shapes.append((flops, flops / float(r[column])))  # FLOPs, seconds
    if not shapes:
        raise ValueError(f"{path}: no rows (want gpu,b,m,n,k,bf16_flops)")
    return shapes


def curve_s(peak_tflops, max_eff, half_gflop, flops):
    return flops / (peak_tflops * 1e12 * max_eff * flops / (flops + half_gflop * 1e9))


def fit(shapes, peak_tflops):
    """max_efficiency and half_efficiency_gflop minimising the squared log-time error.

    The time is (f + h) / (peak * e): for a given h, log e is the mean of log((f + h) / (peak t)),
    so a one-dimensional search over h (golden section on a bracket found by scanning) suffices.
    """
    def at(h):
        logs = [math.log((f + h * 1e9) / (peak_tflops * 1e12 * t)) for f, t in shapes]
        log_e = sum(logs) / len(logs)
        return sum((x - log_e) ** 2 for x in logs), math.exp(log_e)

    grid = [0.05 * i for i in range(0, 2001)]  # 0 to 100 GFLOP
    best = min(grid, key=lambda h: at(h)[0])
    lo, hi = max(0.0, best - 0.05), best + 0.05
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if at(a)[0] < at(b)[0]:
            hi = b
        else:
            lo = a
    h = (lo + hi) / 2
    return at(h)[1], h


def errors(shapes, peak_tflops, max_eff, half_gflop):
    return [curve_s(peak_tflops, max_eff, half_gflop, f) / t - 1 for f, t in shapes]


def profile_curve(path):
    g = bf16_gemm(path)[1]
    return float(g["peak_tflops"]), float(g["max_efficiency"]), float(g["half_efficiency_gflop"])


def median_abs(errs):
    a = sorted(abs(e) for e in errs)
    return a[len(a) // 2]


def summary(label, errs):
    return (f"{label}: {len(errs)} shapes, median |error| {100 * median_abs(errs):.1f}%, "
            f"largest {100 * max(abs(e) for e in errs):.1f}%, "
            f"mean signed {100 * sum(errs) / len(errs):+.1f}% (curve over measured time)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("table")
    ap.add_argument("--peak", type=float, default=989.0, help="the GPU's dense bf16 peak, TFLOP/s (H100 SXM: 989)")
    ap.add_argument("--min-gflop", type=float, default=MIN_GFLOP)
    ap.add_argument("--check", metavar="PROFILE", nargs="+", default=[],
                    help="exit 1 unless each profile's bf16 curve is the fit (its peak: the profile's)")
    ap.add_argument("--within", metavar="PCT", type=float,
                    help="with --check: exit 1 unless each profile's curve gives the table's times within a "
                         "median of PCT percent, instead of being the fit")
    args = ap.parse_args()
    try:
        shapes = read_table(args.table)
        curves = [(path, *profile_curve(path)) for path in args.check]
        peaks = {c[1] for c in curves}
        if len(peaks) > 1:
            raise ValueError(f"the profiles' bf16 peaks differ ({sorted(peaks)}): check them one at a time")
        peak = peaks.pop() if peaks else args.peak
        used = [s for s in shapes if s[0] >= args.min_gflop * 1e9]
        if not used:
            raise ValueError(f"{args.table}: no shape of {args.min_gflop:g} GFLOP or more to fit")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError) as e:
        print(f"gemm_curve: cannot read the input: {e}", file=sys.stderr)
        return 2
    e, h = fit(used, peak)
    print(f"fit over {len(used)} of {len(shapes)} shapes of >= {args.min_gflop:g} GFLOP: "
          f"max_efficiency {e:.3f} ({e * peak:.1f} TFLOP/s), half_efficiency_gflop {h:.2f}")
    print(summary("  the fit", errors(used, peak, e, h)))
    rc = 0
    for path, _, e_have, h_have in curves:
        errs = errors(used, peak, e_have, h_have)
        print(summary(f"  {path}'s curve ({e_have:g}, {h_have:g})", errs))
        if args.within is not None:
            median = median_abs(errs) * 100
            if median > args.within:
                print(f"gemm_curve: {path}'s bf16 curve (max_efficiency {e_have:g}, half_efficiency_gflop {h_have:g}) "
                      f"is {median:.1f}% off {args.table}'s times (median), more than --within {args.within:g}: "
                      f"set it from a fit (here {e:.3f}, {h:.2f}) or say why they differ", file=sys.stderr)
                rc = 1
        elif abs(e_have - e) > 0.005 or abs(h_have - h) > 0.05 * h + 0.05:
            print(f"gemm_curve: {path}'s bf16 curve (max_efficiency {e_have:g}, half_efficiency_gflop {h_have:g}) "
                  f"is not the fit to {args.table} ({e:.3f}, {h:.2f}): set it from the fit", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
