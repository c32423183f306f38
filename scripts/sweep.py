#!/usr/bin/python3
"""Run a grid of kformer points inside one allocation, one JSON report and one log per point.

    sweep.py SPEC --ranks N --bin KFORMER --out DIR [--set k=v ...] [--dry-run] -- LAUNCHER...

LAUNCHER is the prefix that starts N ranks (`mpiexec -n 8 --ppn 4 ...`, `srun ...`,
`jobscripts/mpirun_local.sh 4`); each point runs `LAUNCHER KFORMER DECK key=value ...
output.json=DIR/pNNN.json`. The spec (JSON, or YAML when PyYAML is installed):

    {"deck": "input/tiny.yaml", "set": {"train.steps": 3},
     "vary": {"layout": ["1x1x4", "2x1", "4x1x1"], "parallel.schedule": ["gpipe", "1f1b"],
              "network": [{"name": "fast"}, {"name": "1ms-5Gbps", "comm.emulate.latency_us": 1000,
                                             "comm.emulate.bandwidth_gbps": 5}]},
     "grids": [{"name": "...", "set": {...}, "vary": {...}}, ...]}

Every list under `vary` is one axis of the grid; a dict value sets several keys at once (its
"name" labels it). `layout` is TPxPPxDP (or TPxPP, dp derived); layouts whose product does not
match the rank count are skipped with a message. `grids` runs several grids in one job, each
merged over the top-level deck/set. DIR/points.json lists every point with its status.
"""
import argparse
import itertools
import json
import os
import shlex
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def die(msg):
    sys.exit(f"sweep: {msg}")


def load_spec(path):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        die(f"cannot read the spec {path}: {e.strerror}")
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            die(f"{path} is YAML but PyYAML is missing: install python3-yaml or write the spec as JSON")
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        die(f"{path} is not valid JSON (line {e.lineno}: {e.msg})")


def fmt(v):
    """A value as kformer's command line wants it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(fmt(x) for x in v)
    return str(v)


def parse_layout(text, ranks):
    """'TPxPPxDP' or 'TPxPP' -> (overrides, None), or (None, reason) when it does not fit."""
    try:
        parts = [int(p) for p in str(text).lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) not in (2, 3) or min(parts) < 1:
        die(f"layout '{text}' is not TPxPPxDP or TPxPP with positive integers (e.g. 2x1x2)")
    tp, pp = parts[0], parts[1]
    if len(parts) == 3:
        dp = parts[2]
        if tp * pp * dp != ranks:
            return None, f"layout {text} needs {tp * pp * dp} ranks, the job has {ranks}"
    else:
        if ranks % (tp * pp):
            return None, f"layout {text}: tp*pp={tp * pp} does not divide {ranks} ranks"
        dp = ranks // (tp * pp)
    return [("parallel.tp", tp), ("parallel.pp", pp), ("parallel.dp", dp)], None


def axis_value(key, value, ranks):
    """One value of one axis -> (label, overrides, skip reason or None)."""
    if key == "layout":
        overrides, reason = parse_layout(value, ranks)
        return str(value), overrides or [], reason
    if isinstance(value, dict):
        label = str(value.get("name", ",".join(f"{k}={fmt(v)}" for k, v in value.items())))
        return label, [(k, v) for k, v in value.items() if k != "name"], None
    return fmt(value), [(key, value)], None


def check_keys(obj, valid, where):
    unknown = sorted(set(obj) - valid)
    if unknown:
        die(f"{where} has unknown key '{unknown[0]}' (valid: {', '.join(sorted(valid))})")


def expand(spec, ranks, extra_set=()):
    """The grid as a list of points: dicts with id, grid, varied, overrides, skip."""
    if not isinstance(spec, dict):
        die("the spec must be a mapping with 'deck' and 'vary' (or 'grids')")
    check_keys(spec, {"about", "deck", "set", "vary", "grids"}, "the spec")
    grids = spec.get("grids") or [{}]
    points = []
    for gi, grid in enumerate(grids):
        check_keys(grid, {"about", "name", "deck", "set", "vary"}, f"grids[{gi}]")
        deck = grid.get("deck", spec.get("deck"))
        if not deck:
            die("the spec names no 'deck' (a YAML deck, e.g. input/tiny.yaml)")
        fixed = dict(spec.get("set", {}))
        fixed.update(grid.get("set", {}))
        vary = grid["vary"] if "vary" in grid else spec.get("vary", {})
        for k, v in vary.items():
            if not isinstance(v, list) or not v:
                die(f"vary.{k} must be a non-empty list of values")
        keys = list(vary)
        for combo in itertools.product(*(vary[k] for k in keys)):
            varied, overrides, skip = {}, list(fixed.items()), None
            for k, v in zip(keys, combo):
                label, ov, reason = axis_value(k, v, ranks)
                varied[k] = label
                overrides += ov
                skip = skip or reason
            overrides += list(extra_set)
            points.append({"id": f"p{len(points):03d}", "grid": grid.get("name", f"grid{gi}"),
                           "deck": deck, "varied": varied,
                           "overrides": [[k, fmt(v)] for k, v in overrides], "skip": skip})
    return points


def resolve_deck(deck):
    for base in (os.getcwd(), REPO):
        path = deck if os.path.isabs(deck) else os.path.join(base, deck)
        if os.path.isfile(path):
            return os.path.abspath(path)
    die(f"deck {deck} not found (relative paths are tried from the current folder and {REPO})")


def point_command(point, launcher, binary, out):
    args = [f"{k}={v}" for k, v in point["overrides"]]
    return launcher + [binary, resolve_deck(point["deck"])] + args + \
        [f"output.json={os.path.join(out, point['id'] + '.json')}"]


def run_point(point, cmd, out, timeout):
    report = os.path.join(out, point["id"] + ".json")
    if os.path.exists(report):
        os.remove(report)  # a failed rerun must not leave an old report looking current
    start = time.time()
    with open(os.path.join(out, point["id"] + ".log"), "w") as log:
        log.write("$ " + shlex.join(cmd) + "\n")
        log.flush()
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
            status = "ok" if rc == 0 and os.path.exists(report) else "failed"
        except subprocess.TimeoutExpired:
            rc, status = None, "timeout"
        except OSError as e:
            log.write(f"sweep: cannot start {cmd[0]}: {e.strerror}\n")
            rc, status = None, "failed"
    point.update(status=status, rc=rc, seconds=round(time.time() - start, 3),
                 json=point["id"] + ".json", log=point["id"] + ".log")


def first_error(out, point):
    """kformer's own one-line error from the point's log, else where the log is."""
    path = os.path.join(out, point["log"])
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("kformer: error:"):
                return line.strip() + f"; log: {path}"
    return f"log: {path}"


def write_manifest(out, a, points):
    with open(os.path.join(out, "points.json"), "w") as f:
        json.dump({"spec": os.path.abspath(a.spec), "ranks": a.ranks, "points": points}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 usage="%(prog)s SPEC --ranks N --bin KFORMER --out DIR [options] -- LAUNCHER...")
    ap.add_argument("spec")
    ap.add_argument("--ranks", type=int, required=True, help="ranks the launcher starts")
    ap.add_argument("--bin", required=True, help="the kformer binary")
    ap.add_argument("--out", required=True, help="folder for reports, logs and points.json")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override for every point (e.g. comm.backend=nccl)")
    ap.add_argument("--timeout", type=float, help="seconds before one point is killed")
    ap.add_argument("--dry-run", action="store_true", help="print the launch lines, run nothing")
    # The launcher follows `--` and may hold options of its own: split it off by hand.
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    a.launcher = argv[cut + 1:]
    extra = []
    for kv in a.set:
        if "=" not in kv:
            die(f"--set {kv}: expected KEY=VALUE, e.g. comm.backend=nccl")
        extra.append(tuple(kv.split("=", 1)))
    points = expand(load_spec(a.spec), a.ranks, extra)
    out = os.path.abspath(a.out)
    if not a.dry_run:
        os.makedirs(out, exist_ok=True)
    ran = ok = 0
    for p in points:
        tag = f"{p['id']} {' '.join(f'{k}={v}' for k, v in p['varied'].items())}"
        if p["skip"]:
            print(f"sweep: skip {tag}: {p['skip']}", flush=True)
            p["status"] = "skipped"
            continue
        cmd = point_command(p, a.launcher, a.bin, out)
        if a.dry_run:
            print(f"sweep: point {tag}\n  deck: {cmd[len(a.launcher) + 1]}\n  $ {shlex.join(cmd)}")
            p["status"] = "dry-run"
            continue
        print(f"sweep: run {tag}", flush=True)
        run_point(p, cmd, out, a.timeout)
        ran += 1
        ok += p["status"] == "ok"
        print(f"sweep: {p['status']} {p['id']} in {p['seconds']:.1f} s"
              + ("" if p["status"] == "ok" else f" ({first_error(out, p)})"), flush=True)
        write_manifest(out, a, points)  # after every point: a job killed at walltime keeps it
    skipped = sum(p["status"] == "skipped" for p in points)
    if a.dry_run:
        print(f"sweep: dry run, {len(points) - skipped} points, {skipped} skipped")
        return 0
    write_manifest(out, a, points)
    print(f"sweep: {ok}/{ran} points ok, {skipped} skipped; results in {out}")
    return 0 if ok or not ran else 1


if __name__ == "__main__":
    sys.exit(main())
