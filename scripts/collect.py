#!/usr/bin/python3
"""Turn the JSON reports of one or more sweeps into one CSV (one row per point), and plots.

    collect.py RESULTS_DIR [RESULTS_DIR ...] --csv results.csv [--plots plots/]

A results folder is what scripts/sweep.py wrote (points.json + pNNN.json); a folder without
points.json is read as loose kformer reports (*.json). Columns: the point (study, id, grid,
status, the point's varied values in one cell), each varied axis, the mesh, the deck keys a study changes, the platform, and every
field of the report's summary as summary.<dotted path>. A field a report lacks is an empty cell,
so reports from older and newer kformer versions mix in one table.
"""
import argparse
import csv
import glob
import json
import os
import sys

# Deck keys that studies vary or that explain a row; they are columns even when not varied.
CONFIG_COLS = ["model.family", "model.n_layers", "model.d_model", "train.steps", "train.global_batch",
               "train.micro_batch", "train.seq_len", "parallel.zero", "parallel.schedule",
               "parallel.microbatches", "parallel.virtual_stages", "comm.backend",
               "comm.emulate.latency_us", "comm.emulate.bandwidth_gbps", "straggler.rank",
               "straggler.slowdown", "kernels.gemm", "kernels.attention"]
# DESIGN.md's summary fields, always present as columns (empty where a report lacks them).
SUMMARY_COLS = ["step_ms_median", "tokens_per_s", "model_tflops_per_rank", "mfu",
                "gemm_ceiling_tflops", "iterations_summarised"] + \
    [f"time_split_ms.{k}" for k in ("forward", "backward", "optimizer", "comm_exposed", "comm_total")] + \
    ["pipeline.bubble_measured", "pipeline.bubble_analytic", "straggler.slowdown", "straggler.delay",
     "straggler.slowest_rank", "memory.estimated_bytes", "memory.peak_bytes"]
SUMMARY_COLS = ["summary." + c for c in SUMMARY_COLS]
POINT_COLS = ["study", "point", "grid", "varied", "status", "rc", "seconds"]
MESH_COLS = ["mesh.layout", "mesh.world", "mesh.tp", "mesh.pp", "mesh.dp", "microbatches"]


def flatten(obj, prefix, out):
    """Nested dicts to dotted keys; lists become JSON text (rank lists, groups)."""
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            flatten(v, key, out)
        else:
            out[key] = json.dumps(v) if isinstance(v, list) else v
    return out


def load_report(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"collect: skipping {path}: not a readable JSON report ({e})", file=sys.stderr)
        return None


def report_row(rep):
    """Columns that come from one kformer report."""
    row = {}
    cfg = flatten(rep.get("config", {}), "", {})
    for c in CONFIG_COLS:
        if c in cfg:
            row[c] = cfg[c]
    mesh = rep.get("mesh", {})
    for k in ("world", "tp", "pp", "dp"):
        if k in mesh:
            row[f"mesh.{k}"] = mesh[k]
    if all(k in mesh for k in ("tp", "pp", "dp")):
        row["mesh.layout"] = f"{mesh['tp']}x{mesh['pp']}x{mesh['dp']}"
    # Micro-batches per pipeline per iteration: the deck's value, or what kformer derives for 0.
    mb = cfg.get("parallel.microbatches") or 0
    if not mb and cfg.get("train.micro_batch") and mesh.get("dp"):
        mb = cfg.get("train.global_batch", 0) // (cfg["train.micro_batch"] * mesh["dp"])
    row["microbatches"] = mb or ""
    flatten(rep.get("platform", {}), "platform", row)
    flatten(rep.get("summary", {}), "summary", row)
    its = rep.get("iterations") or []
    if its:
        row["loss_first"], row["loss_last"] = its[0].get("loss"), its[-1].get("loss")
    return row


def folder_rows(folder):
    study = os.path.basename(os.path.normpath(folder))
    manifest = os.path.join(folder, "points.json")
    if os.path.exists(manifest):
        with open(manifest) as f:
            points = json.load(f).get("points", [])
    else:
        points = [{"id": os.path.basename(p)[:-5], "json": os.path.basename(p), "status": "ok"}
                  for p in sorted(glob.glob(os.path.join(folder, "*.json")))]
    rows, axes = [], []
    for p in points:
        row = {"study": study, "point": p["id"], "grid": p.get("grid", ""), "status": p.get("status", ""),
               "rc": p.get("rc", ""), "seconds": p.get("seconds", "")}
        row["varied"] = " ".join(f"{k}={v}" for k, v in p.get("varied", {}).items())
        for k, v in p.get("varied", {}).items():
            row[k] = v
            if k not in axes:
                axes.append(k)
        path = os.path.join(folder, p.get("json") or p["id"] + ".json")
        if p.get("status") == "ok" and os.path.exists(path):
            rep = load_report(path)
            if rep is not None:
                row.update(report_row(rep))
        rows.append(row)
    return rows, axes


def collect(folders):
    """Rows and the column order: point, axes, mesh, config, platform, summary, the rest."""
    rows, axes = [], []
    for folder in folders:
        if not os.path.isdir(folder):
            sys.exit(f"collect: {folder} is not a folder: give the results folder a sweep wrote")
        r, a = folder_rows(folder)
        rows += r
        axes += [x for x in a if x not in axes]
    seen = set().union(*(r.keys() for r in rows)) if rows else set()
    cols = []
    for c in POINT_COLS + axes + MESH_COLS + CONFIG_COLS + \
            sorted(c for c in seen if c.startswith("platform.")) + SUMMARY_COLS + \
            sorted(c for c in seen if c.startswith("summary.")) + sorted(seen):
        if c not in cols:
            cols.append(c)
    return rows, cols, axes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", help="results folders written by scripts/sweep.py")
    ap.add_argument("--csv", required=True, help="the CSV to write")
    ap.add_argument("--plots", help="folder for the PNG plots (scripts/plot_study.py)")
    a = ap.parse_args()
    rows, cols, axes = collect(a.folders)
    if not rows:
        sys.exit(f"collect: no points in {' '.join(a.folders)}: did the sweep run (points.json)?")
    os.makedirs(os.path.dirname(os.path.abspath(a.csv)), exist_ok=True)
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, restval="")
        w.writeheader()
        w.writerows(rows)
    ok = sum(r.get("status") == "ok" for r in rows)
    print(f"collect: {a.csv}: {len(rows)} rows ({ok} ok), {len(cols)} columns")
    if a.plots:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import plot_study
        with open(a.csv, newline="") as f:
            plot_study.plot_all(list(csv.DictReader(f)), axes, a.plots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
