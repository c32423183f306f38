#!/usr/bin/python3
"""Plots of a sweep's CSV (scripts/collect.py) as PNG; a plot whose fields are missing is skipped.

    plot_study.py results.csv --out plots/

layout.png     time per iteration and model TFLOP/s per rank, one bar per point, by layout
bubble.png     pipeline bubble (measured, analytic dashed) vs micro-batches, per pp and schedule
straggler.png  iteration time, and the reported slowdown and delay, vs the injected slowdown
comm.png       time split per point and communication share (exposed and total) of a step
network.png    iteration time per emulated network setting (when a network axis was varied)
"""
import argparse
import csv
import os
import sys

import matplotlib
matplotlib.use("Agg")  # batch nodes have no display
import matplotlib.pyplot as plt  # noqa: E402

STEP = "summary.step_ms_median"
SPLIT = ["forward", "backward", "optimizer", "comm_exposed"]


def num(row, col):
    try:
        return float(row.get(col, ""))
    except ValueError:
        return None


def ok_rows(rows, *cols):
    return [r for r in rows if r.get("status", "ok") == "ok" and all(num(r, c) is not None for c in cols)]


def point_label(row, skip=()):
    """The point's layout, then the values its own grid varied (not the layout's, nor skip's)."""
    parts = [f"{row.get('point', '?')} {row.get('mesh.layout', '')}".strip()]
    for item in row.get("varied", "").split():
        if item.split("=", 1)[0] not in ("layout",) + tuple(skip):
            parts.append(item)
    return "\n".join(parts)


def ticks(ax, labels):
    ax.set_xticks(range(len(labels)), labels, fontsize=7,
                  rotation=30 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center")


def skip(name, why):
    print(f"plots: skip {name}: {why}")


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plots: {path}")


def plot_layout(rows, axes, out):
    rs = ok_rows(rows, STEP, "summary.model_tflops_per_rank")
    if not rs:
        return skip("layout.png", f"no successful point with {STEP} and summary.model_tflops_per_rank")
    rs.sort(key=lambda r: (r.get("mesh.layout", ""), r.get("point", "")))
    labels, xs = [point_label(r) for r in rs], range(len(rs))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(8, 1.1 * len(rs)), 4.5))
    a1.bar(xs, [num(r, STEP) for r in rs], color="tab:blue")
    a1.set_ylabel("time per iteration (ms, median)")
    a2.bar(xs, [num(r, "summary.model_tflops_per_rank") for r in rs], color="tab:green")
    a2.set_ylabel("model TFLOP/s per rank")
    for a in (a1, a2):
        a.set_xlabel("point, layout tp x pp x dp")
        ticks(a, labels)
    save(fig, out, "layout.png")


def plot_bubble(rows, axes, out):
    rs = [r for r in ok_rows(rows, "summary.pipeline.bubble_measured", "microbatches")
          if (num(r, "mesh.pp") or 1) > 1]
    if not rs:
        return skip("bubble.png", "no pp>1 point reports summary.pipeline.bubble_measured")
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    groups = {}
    for r in rs:
        key = (r.get("mesh.pp"), r.get("parallel.schedule", ""), r.get("parallel.virtual_stages", ""))
        groups.setdefault(key, []).append(r)
    for (pp, sched, v), g in sorted(groups.items()):
        g.sort(key=lambda r: num(r, "microbatches"))
        x = [num(r, "microbatches") for r in g]
        name = f"pp={pp} {sched}" + (f" v={v}" if v not in ("", "1") else "")
        line, = ax.plot(x, [num(r, "summary.pipeline.bubble_measured") for r in g], "o-", label=name)
        ana = [num(r, "summary.pipeline.bubble_analytic") for r in g]
        if all(a is not None for a in ana):
            ax.plot(x, ana, "--", color=line.get_color(), label=name + " analytic")
    ax.set_xlabel("micro-batches per iteration (m)")
    ax.set_ylabel("bubble fraction")
    ax.legend(fontsize=7)
    save(fig, out, "bubble.png")


def plot_straggler(rows, axes, out):
    rs = [r for r in ok_rows(rows, "straggler.slowdown", STEP) if (num(r, "straggler.rank") or -1) >= 0]
    if len({num(r, "straggler.slowdown") for r in rs}) < 2:
        return skip("straggler.png", "fewer than two injected slowdowns (straggler.rank >= 0)")
    rs.sort(key=lambda r: num(r, "straggler.slowdown"))
    x = [num(r, "straggler.slowdown") for r in rs]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.2))
    a1.plot(x, [num(r, STEP) for r in rs], "o-")
    a1.set_xlabel("injected slowdown")
    a1.set_ylabel("time per iteration (ms, median)")
    for col, style in (("summary.straggler.slowdown", "o-"), ("summary.straggler.delay", "s-")):
        y = [num(r, col) for r in rs]
        if any(v is not None for v in y):
            a2.plot(x, y, style, label=col.split(".", 1)[1] + " (reported)")
    a2.plot(x, x, ":", color="gray", label="slowdown = injected")
    a2.set_xlabel("injected slowdown")
    a2.legend(fontsize=7)
    save(fig, out, "straggler.png")


def plot_comm(rows, axes, out):
    cols = [f"summary.time_split_ms.{k}" for k in SPLIT] + [STEP]
    rs = ok_rows(rows, *cols)
    if not rs:
        return skip("comm.png", "no successful point reports summary.time_split_ms")
    labels, xs = [point_label(r) for r in rs], range(len(rs))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(9, 1.2 * len(rs)), 4.5))
    bottom = [0.0] * len(rs)
    for k in SPLIT:
        v = [num(r, f"summary.time_split_ms.{k}") for r in rs]
        a1.bar(xs, v, bottom=bottom, label=k, hatch="//" if k.startswith("comm") else None)
        bottom = [b + x for b, x in zip(bottom, v)]
    a1.set_ylabel("ms per iteration")
    a1.legend(fontsize=7)
    step = [num(r, STEP) for r in rs]
    for off, k in ((-0.2, "comm_exposed"), (0.2, "comm_total")):
        share = [100 * (num(r, f"summary.time_split_ms.{k}") or 0) / s for r, s in zip(rs, step)]
        a2.bar([x + off for x in xs], share, width=0.4, label=k)
    a2.set_ylabel("share of the iteration (%)")
    a2.legend(fontsize=7)
    for a in (a1, a2):
        ticks(a, labels)
    save(fig, out, "comm.png")


def plot_network(rows, axes, out):
    net = [a for a in axes if a == "network" or a.startswith("comm.emulate.")]
    rs = ok_rows(rows, STEP)
    if not net or len({r.get(net[0]) for r in rs}) < 2:
        return skip("network.png", "no network axis (network or comm.emulate.*) with two or more values")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    groups = {}
    for r in rs:
        name = " ".join(point_label(r, skip=tuple(net)).split()[1:])  # the same line across networks
        groups.setdefault(name, []).append(r)
    order = list(dict.fromkeys(r.get(net[0]) for r in rs))
    for name, g in sorted(groups.items()):
        g.sort(key=lambda r: order.index(r.get(net[0])))
        ax.plot([r.get(net[0]) for r in g], [num(r, STEP) for r in g], "o-", label=name)
    ax.set_xlabel(net[0])
    ax.set_ylabel("time per iteration (ms, median)")
    ax.legend(fontsize=7)
    save(fig, out, "network.png")


def plot_all(rows, axes, out):
    os.makedirs(out, exist_ok=True)
    for f in (plot_layout, plot_bubble, plot_straggler, plot_comm, plot_network):
        f(rows, axes, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="CSV written by scripts/collect.py")
    ap.add_argument("--out", required=True, help="folder for the PNG files")
    a = ap.parse_args()
    try:
        with open(a.csv, newline="") as f:
            reader = csv.DictReader(f)
            rows, cols = list(reader), reader.fieldnames or []
    except OSError as e:
        sys.exit(f"plot_study: cannot read {a.csv}: {e.strerror}; run scripts/collect.py first")
    if "seconds" not in cols or "mesh.layout" not in cols:
        sys.exit(f"plot_study: {a.csv} lacks the collect.py columns (seconds, mesh.layout): regenerate it")
    # collect.py writes the varied axes between the point columns and the mesh columns.
    plot_all(rows, cols[cols.index("seconds") + 1:cols.index("mesh.layout")], a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
