#!/usr/bin/python3
"""Predicts published GPU training runs with `kformer predict` and compares the step times.

Each row of scripts/published_runs.yaml (its sources, layouts and assumptions are written there)
becomes a deck; `kformer predict` runs it on the row's shipped machine profile with
predict.system set to the row's system (the preset of the software that ran it: its attention
kernels, whether its pipeline sends and gradient reduction overlap the computation). Prints one
markdown table (measured and predicted seconds per iteration, the error, the predicted memory
peak and whether it fits), the median and largest absolute errors over the rows kept in the
statistics, and, for seed note 004's layouts measured at a steady iteration, the fastest per GPU as
logged and as predicted. A row with `in_stats: false`, or `steady: false` (its only measurement is a
job's first iteration, with start-up costs predict does not describe), is shown but not counted.

  scripts/validate_published.py [--kformer build/default/bin/kformer] [--runs scripts/published_runs.yaml]
                                [--decks DIR] [--md FILE] [--doc docs/predict-published.md]

--decks keeps each row's deck (DIR/ID.yaml) and report (DIR/ID.json); --md writes the table to
FILE; --doc replaces the text between the markers "<!-- published-validation:begin -->" and
"<!-- published-validation:end -->" in that file with it. Exit 1 when a prediction fails, or
with --check (the suite's predict_published) when the predicted fastest of seed note 004's layouts
is not the logged one, when the median absolute error exceeds 10% or any row's 20%, when a
system's mean signed error leaves +-5% (or the wider bound the runs file's open_biases names for
it, with why; a named system that has come within +-5% fails too, so the list only shrinks), when a
source of rows shown but not counted that the runs file's shown_bounds names has a median absolute
error above its bound (or more than a point below it: the bound only tightens), or when
docs/predict-published.md's table is not what this run prints (regenerate it with --doc docs/predict-published.md).
A shown source's bound may be one per machine profile (`by_machine`). Rows that name `pairs_with`
(the same software and layout on another machine) get a line: the ratio of each row's predicted over
measured to its partner's, median and range, what one machine profile misses against the other.
With --check, each machine profile's published_accuracy must be what its steady rows (counted or
shown, `stand_in` rows aside) give: rows, median absolute and mean signed error in %, which
`kformer predict` prints for that profile.
The peak column is the report's predicted peak per rank (with the process baseline): what the software that
ran the row holds where predict counts it (predict.memory: composer_mpt for the llm-foundry presets' rows,
megatron_lm for Megatron-LM's; marked *), else kformer's own step at the row's layout. After the table, what the sources say of memory
(scripts/published_memory.py): the rows that publish a peak against the predicted one, held to the runs
file's memory_bound_pct with --check; its memory_facts, layouts that ran out of memory, which --check fails
on when predicted to fit; the rows that ran, which --check fails on when their software's count says
they do not fit; and the micro-batch each row ran against the largest predict finds fits (every row is
predicted with predict.largest_micro_batch=true), a count.
"""
import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import published_memory  # noqa: E402 (beside this script)

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- published-validation:begin -->", "<!-- published-validation:end -->"


def nested(flat):
    """{'model.n_layers': 2, ...} -> {'model': {'n_layers': 2}, ...}"""
    out = {}
    for key, value in flat.items():
        section, name = key.split(".", 1)
        out.setdefault(section, {})[name] = value
    return out


SCALE_KINDS = ("compute", "memory")
MACHINES = os.path.join(TOP, "input", "machines")


def profile_path(machine):
    """The shipped profile a row's `machine` names."""
    return os.path.join(MACHINES, machine + ".yaml")


def scaled_profile(profile, kind, factor):
    """A machine profile (parsed YAML) whose `compute` rates (every GEMM curve's max_efficiency and
    every attention rate, in both precisions, measured points' times over the factor) or `memory`
    rates (the copy and the memory-bound families) run at `factor` of the profile's."""
    q = copy.deepcopy(profile)
    sections = [q] + ([q["bf16"]] if isinstance(q.get("bf16"), dict) else [])
    if kind == "compute":
        for sec in sections:
            gemm, att = sec.get("gemm") or {}, sec.get("attention") or {}
            if "max_efficiency" in gemm:
                gemm["max_efficiency"] *= factor
            for point in (gemm.get("points") or []) + (att.get("points") or []):
                point["forward_us"] /= factor
                point["backward_us"] /= factor
            for key, value in att.items():  # TFLOP/s: one figure, by T, or by head size and T
                if isinstance(value, (int, float)):
                    att[key] = value * factor
                elif key != "points":
                    att[key] = {k: ({t: r * factor for t, r in v.items()} if isinstance(v, dict) else v * factor)
                                for k, v in value.items()}
    else:
        if "copy_gbps" in q:
            q["copy_gbps"] *= factor
        for sec in sections:
            for key in ("memory_bound", "memory_gbps"):
                if isinstance(sec.get(key), dict):
                    sec[key] = {k: v * factor for k, v in sec[key].items()}
    return q


def usage_error(message):
    print(f"validate_published: {message}", file=sys.stderr)
    sys.exit(2)


def scaled_machines(specs, folder):
    """--scale MACHINE:KIND=FACTOR, repeatable: {machine: path of its scaled profile in folder}."""
    scales = {}
    for spec in specs:
        try:
            machine, rest = spec.split(":", 1)
            kind, factor = rest.split("=", 1)
            factor = float(factor)
        except ValueError:
            usage_error(f"--scale {spec}: give MACHINE:KIND=FACTOR, e.g. h100-sxm-80gb:compute=0.9")
        if kind not in SCALE_KINDS or not factor > 0 or not os.path.exists(profile_path(machine)):
            usage_error(f"--scale {spec}: KIND is one of {', '.join(SCALE_KINDS)}, FACTOR above 0, "
                        f"MACHINE a profile in input/machines/")
        scales.setdefault(machine, []).append((kind, factor))
    paths = {}
    for machine, changes in scales.items():
        with open(profile_path(machine)) as f:
            profile = yaml.safe_load(f)
        for kind, factor in changes:
            profile = scaled_profile(profile, kind, factor)
        paths[machine] = os.path.join(folder, f"{machine}-scaled.yaml")
        with open(paths[machine], "w") as f:
            f.write(f"# {machine} with {', '.join(f'{k} x{v}' for k, v in changes)} (validate_published.py --scale)\n")
            yaml.safe_dump(profile, f, sort_keys=False)
    return paths


def predict(kformer, row, folder, machines=None):
    deck = dict(row["deck"])
    deck.update({"data.source": "random", "train.steps": 1})
    path = os.path.join(folder, row["id"] + ".yaml")
    report = os.path.join(folder, row["id"] + ".json")
    with open(path, "w") as f:
        f.write(f"# {row['id']}: {row['what']} ({row['source']}); written by scripts/validate_published.py\n")
        yaml.safe_dump(nested(deck), f, sort_keys=False)
    machine = (machines or {}).get(row["machine"]) or profile_path(row["machine"])
    cmd = [kformer, "predict", path, f"predict.machine={machine}", f"output.json={report}"]
    cmd += [f"predict.system={row['system']}", "predict.largest_micro_batch=true"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{row['id']}: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip() or r.stdout.strip()}")
    with open(report) as f:
        return json.load(f)


def gpus(row):
    d = row["deck"]
    return d.get("parallel.tp", 1) * d.get("parallel.pp", 1) * max(1, d.get("parallel.dp", 1))


SYSTEM_BOUND_PCT = 5  # issue 37: every system's mean signed error within +-5%
SHOWN_SLACK_PCT = published_memory.SLACK_PCT  # a shown source's bound may sit at most this far above its median


def system_guard_line(open_biases):
    """The guard as the table states it: +-5% a system, the wider bounds the runs file names."""
    line = f"Guarded: every system's mean signed error within +-{SYSTEM_BOUND_PCT}%"
    if open_biases:
        line += (", except (open, scripts/published_runs.yaml's open_biases) " +
                 ", ".join(f"{k} within +-{v['bound_pct']}%" for k, v in sorted(open_biases.items())))
    return line + ".\n"


def system_bias_problems(signed, open_biases):
    """Each system's mean signed error against +-5% or its named wider bound; a named bound that
    is no longer needed is a problem too (the list only shrinks)."""
    problems = []
    for name in sorted(set(open_biases) - set(signed)):
        problems.append(f"open_biases names {name}, which no row in the statistics runs: drop its line")
    for name, errs in sorted(signed.items()):
        mean = 100 * statistics.mean(errs)
        bound = open_biases.get(name, {}).get("bound_pct", SYSTEM_BOUND_PCT)
        if abs(mean) > bound:
            problems.append(f"{name}'s mean signed error is {mean:+.1f}% (at most +-{bound}%)")
        elif name in open_biases and abs(mean) <= SYSTEM_BOUND_PCT:
            problems.append(f"{name}'s mean signed error is {mean:+.1f}%, within +-{SYSTEM_BOUND_PCT}%: "
                            "drop its line from open_biases in scripts/published_runs.yaml")
    return problems


def shown_bound_problems(shown, shown_bounds):
    """Each source the runs file's shown_bounds names (rows shown, not in the statistics) against
    its bound on the median absolute error: `bound_pct` over all its rows, or `by_machine`, a bound
    for its rows on each machine profile (a source whose rows ran the same layouts on two GPUs). A
    bound more than SHOWN_SLACK_PCT above its median is a problem too (tighten it), and so is a name
    no shown row has, or a machine none of its shown rows ran on."""
    errs = {}
    for (source, machine, _), v in shown.items():
        errs.setdefault(source, {}).setdefault(machine, []).extend(abs(e) for e in v)
    problems = []
    for name, b in sorted(shown_bounds.items()):
        if name not in errs:
            problems.append(f"shown_bounds names {name}, which no shown row comes from: drop its line")
            continue
        if "by_machine" in b:
            groups = [(f"{name}'s shown rows on {m}", errs[name].get(m), bound)
                      for m, bound in sorted(b["by_machine"].items())]
        else:
            groups = [(f"{name}'s shown rows", [e for v in errs[name].values() for e in v], b["bound_pct"])]
        for what, group, bound in groups:
            if not group:
                problems.append(f"{what}: none is shown: drop the machine from its shown_bounds")
                continue
            median = 100 * statistics.median(group)
            if median > bound:
                problems.append(f"{what} are off by {median:.1f}% (median; at most {bound}%)")
            elif bound - median > SHOWN_SLACK_PCT:
                problems.append(f"{what} are off by {median:.1f}% (median), more than {SHOWN_SLACK_PCT}% under its "
                                f"bound of {bound}%: lower it in scripts/published_runs.yaml's shown_bounds")
    return problems


def accuracy_of(errs):
    """What a profile's published_accuracy says of its rows' signed errors (fractions)."""
    return {"rows": len(errs), "median_abs_pct": round(100 * statistics.median(abs(e) for e in errs), 1),
            "mean_signed_pct": round(100 * statistics.mean(errs), 1)}


def accuracy_problems(steady_by_machine):
    """Each shipped profile against its steady rows: published_accuracy present and equal to
    accuracy_of them where rows ran on it, absent where none did."""
    problems = []
    for name in sorted(f[:-5] for f in os.listdir(MACHINES) if f.endswith(".yaml")):
        with open(profile_path(name)) as f:
            said = (yaml.safe_load(f) or {}).get("published_accuracy")
        want = accuracy_of(steady_by_machine[name]) if name in steady_by_machine else None
        if want is None and said is not None:
            problems.append(f"input/machines/{name}.yaml has published_accuracy, but no published row runs on it: "
                            "drop it")
        elif want is not None and (not isinstance(said, dict) or said.get("rows") != want["rows"] or
                                   any(abs(float(said.get(k, 1e9)) - want[k]) > 0.05
                                       for k in ("median_abs_pct", "mean_signed_pct"))):
            problems.append(f"input/machines/{name}.yaml's published_accuracy is {said}, this run's "
                            f"{{rows: {want['rows']}, median_abs_pct: {want['median_abs_pct']}, "
                            f"mean_signed_pct: {want['mean_signed_pct']}}}: set it so")
    return problems


def paired_lines(rows, ratio):
    """A line per source and pair of machines whose rows name `pairs_with` (the same software and layout
    on another machine): the predicted-over-measured ratio of each row over its partner's, which takes
    out what the software costs on both and leaves what the machine profiles miss against each other."""
    by_id = {r["id"]: r for r in rows}
    groups = {}
    for r in rows:
        partner = by_id.get(r.get("pairs_with"))
        if partner and r["id"] in ratio and partner["id"] in ratio:
            key = (r["source"], r["machine"], partner["machine"])
            groups.setdefault(key, []).append(ratio[r["id"]] / ratio[partner["id"]])
    return "".join(
        f"Paired: {src}'s rows on {m} against the same layouts on {pm}, predicted over measured, one over the other: "
        f"median {statistics.median(v):.3f}, {min(v):.3f} to {max(v):.3f} ({len(v)} pairs).\n"
        for (src, m, pm), v in sorted(groups.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kformer", default=os.path.join(TOP, "build", "default", "bin", "kformer"))
    ap.add_argument("--runs", default=os.path.join(TOP, "scripts", "published_runs.yaml"))
    ap.add_argument("--decks", help="keep each row's deck and report here")
    ap.add_argument("--md", help="write the table to this file")
    ap.add_argument("--doc", help="replace the marked section of this markdown file with the table")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the fastest seed-004 layout is the logged one")
    ap.add_argument("--scale", action="append", default=[], metavar="MACHINE:KIND=FACTOR",
                    help="what if: predict MACHINE's rows with its compute or memory rates times FACTOR (repeatable; "
                         "not with --check, --doc or --md)")
    args = ap.parse_args()
    if args.scale and (args.check or args.doc or args.md):
        usage_error("--scale is a what-if: it does not go with --check, --doc or --md, which are "
                    "about the shipped profiles")

    with open(args.runs) as f:
        runs = yaml.safe_load(f)
    folder = args.decks or tempfile.mkdtemp(prefix="kformer-published-")
    os.makedirs(folder, exist_ok=True)
    machines = scaled_machines(args.scale, folder)

    lines = ["| row | source | run | GPUs | measured s | predicted s | error | peak GB (fits; * the software's) |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    errors, failed, per_gpu, same_fastest, signed, by_machine, shown = [], 0, [], True, {}, {}, {}
    ratio = {}  # row id -> predicted over measured
    reports = {}  # row or memory fact id -> its report
    steady_by_machine = {}  # machine -> signed errors of its steady rows, counted or shown, but no stand-in
    for row in runs["rows"]:
        try:
            rep = predict(args.kformer, row, folder, machines)
        except RuntimeError as e:
            print(e, file=sys.stderr)
            failed += 1
            lines.append(f"| {row['id']} | {row['source']} | {row['what']} | {gpus(row)} | {row['measured_s']} | failed | | |")
            continue
        reports[row["id"]] = rep
        step = rep["summary"]["step_ms_median"] / 1e3
        ratio[row["id"]] = step / row["measured_s"]
        err = ratio[row["id"]] - 1
        steady = row.get("steady", True)  # false: its only measurement is a job's first iteration
        kept = row.get("in_stats", True) and steady
        if steady and not row.get("stand_in", False):
            steady_by_machine.setdefault(row["machine"], []).append(err)
        if kept:
            errors.append(abs(err))
            signed.setdefault(row["system"], []).append(err)
            by_machine.setdefault(row["machine"], []).append(err)
        else:
            shown.setdefault((row["source"], row["machine"], steady), []).append(err)
        mem = rep["summary"]["memory"]
        peak = mem["peak_bytes"] / 1e9
        fits = ("yes" if rep["predicted"]["fits"] else "no") + ("" if mem.get("counted_as", "kformer") == "kformer" else "*")
        lines.append(f"| {row['id']} | {row['source']} | {row['what']} | {gpus(row)} | {row['measured_s']:.2f} | "
                     f"{step:.2f} | {100 * err:+.1f}%{'' if kept else ' (not in stats)' if steady else ' (a first iteration, not in stats)'} | "
                     f"{peak:.1f} ({fits}) |")
        if row["source"] == "seed004" and steady:
            per_gpu.append((row["id"], row["what"], row["measured_s"] * gpus(row), step * gpus(row)))

    out = "\n".join(lines) + "\n\n"
    if args.scale:
        out = (f"What if (--scale {' '.join(args.scale)}): these profiles' rates scaled, the shipped ones' bounds "
               "beside them.\n\n" + out)
    if errors:
        out += (f"{len(errors)} rows in the statistics: median absolute error {100 * statistics.median(errors):.1f}%, "
                f"largest {100 * max(errors):.1f}%, {sum(e > 0.2 for e in errors)} above 20%.\n")
        out += ("Mean signed error by system: " +
                ", ".join(f"{k} {100 * statistics.mean(v):+.1f}% ({len(v)} rows)" for k, v in sorted(signed.items())) +
                ".\n")
        out += system_guard_line(runs.get("open_biases") or {})
        out += ("Mean signed error by machine profile: " +
                ", ".join(f"{k} {100 * statistics.mean(v):+.1f}% ({len(v)} rows)" for k, v in sorted(by_machine.items())) +
                ".\n")
    shown_bounds = runs.get("shown_bounds") or {}
    for (source, machine, steady), v in sorted(shown.items()):
        what = "" if steady else " (each measured only on a job's first iteration)"
        b = shown_bounds.get(source, {})
        bound = b["by_machine"].get(machine) if "by_machine" in b else b.get("bound_pct")
        guard = ("" if bound is None else
                 f" (guarded: at most {bound}%, scripts/published_runs.yaml's shown_bounds)")
        out += (f"Shown, not in the statistics: {source} on {machine}{what}, {len(v)} rows, median absolute error "
                f"{100 * statistics.median(abs(e) for e in v):.1f}%{guard}, mean signed {100 * statistics.mean(v):+.1f}%.\n")
    out += paired_lines(runs["rows"], ratio)
    for fact in runs.get("memory_facts") or []:
        try:
            reports[fact["id"]] = predict(args.kformer, fact, folder, machines)
        except RuntimeError as e:
            print(e, file=sys.stderr)
            failed += 1
    memory_text, memory_problems = published_memory.memory_section(runs, reports)
    out += memory_text
    out += ("Every steady row by machine profile, counted or shown, stand-ins aside (each profile's "
            "published_accuracy, which kformer predict prints): " +
            "; ".join(f"{m} {a['rows']} rows, median {a['median_abs_pct']:.1f}%, mean {a['mean_signed_pct']:+.1f}%"
                      for m, a in ((m, accuracy_of(v)) for m, v in sorted(steady_by_machine.items()))) + ".\n")
    if per_gpu:
        by_log = min(per_gpu, key=lambda r: r[2])
        by_predict = min(per_gpu, key=lambda r: r[3])
        same_fastest = by_log[0] == by_predict[0]
        # how far the runner-up is in each, which says how firmly each picks its fastest
        ahead = lambda col, best: 100 * (min(r[col] for r in per_gpu if r[0] != best[0]) / best[col] - 1)
        out += (f"Seed note 004's layouts, fastest per GPU (least GPU-seconds per iteration): logged {by_log[0]} "
                f"({by_log[1]}; {ahead(2, by_log):.1f}% ahead of the next), predicted {by_predict[0]} ({by_predict[1]}; "
                f"{ahead(3, by_predict):.1f}% ahead of the next).\n")
    print(out, end="")
    if args.md:
        with open(args.md, "w") as f:
            f.write(out)
    if args.doc:
        with open(args.doc) as f:
            text = f.read()
        if BEGIN not in text or END not in text:
            sys.exit(f"{args.doc} has no {BEGIN} ... {END} markers: add them where the table goes")
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        with open(args.doc, "w") as f:
            f.write(head + BEGIN + "\n" + out + END + tail)
    if args.check:
        problems = []
        if not same_fastest:
            problems.append("the predicted fastest layout is not the logged one")
        if errors and statistics.median(errors) > 0.10:
            problems.append(f"the median absolute error is {100 * statistics.median(errors):.1f}% (at most 10%)")
        if errors and max(errors) > 0.20:
            problems.append(f"a row is off by {100 * max(errors):.1f}% (at most 20%)")
        problems += system_bias_problems(signed, runs.get("open_biases") or {})
        problems += shown_bound_problems(shown, shown_bounds)
        problems += accuracy_problems(steady_by_machine)
        problems += memory_problems
        with open(os.path.join(TOP, "docs", "predict-published.md")) as f:
            doc = f.read()
        if BEGIN in doc and END in doc and doc.split(BEGIN, 1)[1].split(END, 1)[0].strip() != out.strip():
            problems.append("docs/predict-published.md's table differs from this run: regenerate it with "
                            "scripts/validate_published.py --doc docs/predict-published.md")
        for p in problems:
            print("validate_published:", p, file=sys.stderr)
        if problems:
            return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
