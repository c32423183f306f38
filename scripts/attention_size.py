#!/usr/bin/python3
"""The flash kernels' rate against the size of a call: a lent GPU's timings beside a profile's charts.

    scripts/attention_size.py FLASH_RATE.json PROFILE.yaml [PROFILE.yaml ...] [--check] [--within PCT]

FLASH_RATE.json: bench/flash2_rate.py's output (a GPU session's flash/flash2_rate.json): PyTorch SDPA's
FlashAttention-2 and cuDNN backends timed at the published rows' attention shapes. A profile's
bf16.attention rates (flash2_tflops, cudnn_forward_tflops, cudnn_backward_tflops) are its authors'
charts, for calls of 16k tokens at hidden 2048; bf16.attention.half_rate_share (h) says how a call with
less work runs: at (1 + h) s / (s + h) of the charted rate, s its share of the charts' work (B H T hd
over 2048 x 16384), the charted rate from share 1 up (predict's kernel_costs.cpp, attention_size_factor).

Prints, per timed call (cuDNN's forward and backward, FlashAttention-2's both together at the head sizes
the profile charts): its share, measured over charted, and what the profile's h gives; and the h that
fits the calls under share 1 best (least squares in log). With --check, exit 1 where a call under
share 1 is more than --within percent (default 15) from the profile's figure. The FLOP counts are
flash2_rate.py's: the forward 2 B H T^2 hd, the backward 2.5 times that, as predict counts them.
"""
import argparse
import json
import math
import sys

import yaml

CHART_WORK = 2048 * 16384  # B H T hd of the charts' calls


def seq_rate(m, t):
    """A rate by sequence length, interpolated in log2 T and held beyond the ends (predict's SeqRate)."""
    if not isinstance(m, dict):
        return float(m)
    ks = sorted(int(k) for k in m)
    m = {int(k): float(v) for k, v in m.items()}
    if t <= ks[0]:
        return m[ks[0]]
    if t >= ks[-1]:
        return m[ks[-1]]
    for a, b in zip(ks, ks[1:]):
        if a <= t <= b:
            f = (math.log2(t) - math.log2(a)) / (math.log2(b) - math.log2(a))
            return m[a] + f * (m[b] - m[a])


def factor(share, h):
    return 1.0 if h <= 0 or share >= 1 else share * (1 + h) / (share + h)


def calls(rates, att):
    """(what, share, measured / charted) of every timed call the profile charts."""
    out = []
    for r in rates["backends"].get("cudnn", []):
        if r["hd"] != 128:  # the cuDNN charts are of heads of 128
            continue
        s = r["B"] * r["H"] * r["T"] * r["hd"] / CHART_WORK
        name = f"B{r['B']} T{r['T']} H{r['H']} hd{r['hd']}"
        out.append((f"cudnn forward {name}", s, r["forward_tflops"] / seq_rate(att["cudnn_forward_tflops"], r["T"])))
        out.append((f"cudnn backward {name}", s, r["backward_tflops"] / seq_rate(att["cudnn_backward_tflops"], r["T"])))
    fa2 = att.get("flash2_tflops") or {}
    for r in rates["backends"].get("flash", []):
        by_hd = {int(k): v for k, v in fa2.items()} if isinstance(fa2, dict) else {}
        if r["hd"] not in by_hd:
            continue
        s = r["B"] * r["H"] * r["T"] * r["hd"] / CHART_WORK
        out.append((f"flash2 fwd+bwd B{r['B']} T{r['T']} H{r['H']} hd{r['hd']}", s,
                    r["fwd_bwd_tflops"] / seq_rate(by_hd[r["hd"]], r["T"])))
    return out


def fit(small):
    """The h of least squared log error over the calls under share 1."""
    return min((sum(math.log(m / factor(s, h)) ** 2 for _, s, m in small), h) for h in
               (x / 1000 for x in range(1, 2001)))[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rates")
    ap.add_argument("profiles", nargs="+")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--within", type=float, default=15.0)
    a = ap.parse_args()
    rates = json.load(open(a.rates))
    bad = []
    for path in a.profiles:
        att = ((yaml.safe_load(open(path)) or {}).get("bf16") or {}).get("attention") or {}
        if "cudnn_forward_tflops" not in att:
            sys.exit(f"attention_size: {path} charts no cuDNN rates (bf16.attention.cudnn_forward_tflops)")
        h = float(att.get("half_rate_share", 0))
        timed = calls(rates, att)
        small = [c for c in timed if c[1] < 1]
        print(f"{path}: half_rate_share {h:g}; the calls under share 1 fit best at {fit(small):.3f}" if small else
              f"{path}: half_rate_share {h:g}; no call under share 1 timed")
        print("| call | share of the charts' work | measured / charted | the profile's | off |")
        print("|---|---|---|---|---|")
        for what, s, m in timed:
            f = factor(s, h)
            off = 100 * (f / m - 1)
            print(f"| {what} | {s:.3f} | {m:.3f} | {f:.3f} | {off:+.1f}% |")
            if s < 1 and abs(off) > a.within:
                bad.append(f"{path}: {what} (share {s:.3f}) measured {m:.3f} of the chart, the profile gives {f:.3f}")
    if a.check and bad:
        for b in bad:
            print(f"attention_size: {b}, more than {a.within:g}% off", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
