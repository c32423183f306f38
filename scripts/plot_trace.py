#!/usr/bin/python3
"""Draws a kformer timeline (output.trace=DIR -> DIR/trace.json) as a PNG: one row per rank,
forward spans in blue, backward in orange, the optimizer in green, communication as thin bars
under each row, micro-batch numbers on the compute spans. For docs and quick looks without Perfetto.

    scripts/plot_trace.py DIR/trace.json out.png [--iteration N]
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"forward": "#4c72b0", "backward": "#dd8452", "optimizer": "#55a868"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--iteration", type=int, help="draw this iteration only (default: the last)")
    a = ap.parse_args()
    try:
        events = [e for e in json.load(open(a.trace))["traceEvents"] if e.get("ph") == "X"]
    except (OSError, ValueError, KeyError) as err:
        sys.exit(f"plot_trace.py: cannot read {a.trace} ({err}): give the trace.json that output.trace wrote")
    its = sorted({e["args"].get("iteration", 0) for e in events})
    it = a.iteration if a.iteration is not None else its[-1]
    events = [e for e in events if e["args"].get("iteration", 0) == it]
    if not events:
        sys.exit(f"plot_trace.py: no events for iteration {it} (have {its})")
    t0 = min(e["ts"] for e in events)
    ranks = sorted({e["pid"] for e in events})
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(ranks) + 1.2))
    for e in events:
        y = ranks.index(e["pid"])
        start, dur = (e["ts"] - t0) / 1e3, e["dur"] / 1e3
        if e["cat"] == "comm":
            ax.broken_barh([(start, max(dur, 0.01))], (y + 0.30, 0.12), color="#8c8c8c")
            continue
        ax.broken_barh([(start, dur)], (y - 0.35, 0.6), color=COLORS.get(e["name"], "#999999"), edgecolor="white")
        if "micro_batch" in e["args"] and dur > 0:
            ax.text(start + dur / 2, y - 0.05, str(e["args"]["micro_batch"]), ha="center", va="center", fontsize=7,
                    color="white")
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels([f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the iteration's first event")
    ax.set_title(f"iteration {it}: forward (blue), backward (orange), optimizer (green), communication (grey)")
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    print(f"plot_trace: {a.png}")


if __name__ == "__main__":
    main()
