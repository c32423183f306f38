#!/usr/bin/python3
"""The user guide's performance-portability table, generated from the runs kept in the repository:
kformer's reports of the portability deck (bench/step_vs_torch_gpu.py's gpt2 shape) from each CPU run
under docs/cpu-runs/ (scripts/cpu_run.sh) and each GPU run under docs/gpu-runs/ (scripts/gpu_session.sh,
its perf/ folder), one table a precision, with Pennycook's PP over the platforms (scripts/portability.py).

    scripts/portability_table.py [--check] [--doc docs/user-guide.md]

Writes between the doc's `<!-- portability:begin -->` and `<!-- portability:end -->`; --check writes
nothing and exits 1 with a diff when the doc differs from what the kept files give (ctest
portability_docs). Exit 2: no markers, a kept run that does not match its manifest, or two reports
of one precision that are not the same deck.
"""
import argparse
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_manifest  # noqa: E402
import marked_section  # noqa: E402
import portability  # noqa: E402

BEGIN, END = "<!-- portability:begin -->", "<!-- portability:end -->"
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRECISIONS = ("fp32", "bf16")


class Refused(Exception):
    """Why the kept runs cannot make the table, in one line."""


def load(path):
    with open(path) as f:
        return json.load(f)


def kept_reports(top, precision):
    """(run folder name, report path, bench JSON or None, portability.platform's argument) of every kept
    run with a report in this precision."""
    out = []
    for pattern in ("docs/cpu-runs/*/step_{p}_kformer.json", "docs/gpu-runs/*/perf/step_{p}_kformer.json"):
        for path in sorted(glob.glob(os.path.join(top, pattern.format(p=precision)))):
            kind, run = os.path.relpath(path, top).split(os.sep)[1:3]
            try:
                m = gpu_manifest.check(os.path.join(top, "docs", kind, run))
            except gpu_manifest.Problem as e:
                raise Refused(f"docs/{kind}/{run}: {e}") from None
            bench = os.path.join(os.path.dirname(path), f"step_{precision}.json")
            # A GPU run's platform is its GPU (the manifest's, from nvidia-smi), not the host CPU its
            # report names beside the backend.
            gpu = (m or {}).get("gpu") if kind == "gpu-runs" else None
            arg = f"{load(path).get('platform', {}).get('backend', 'Cuda')} {gpu}={path}" if gpu else path
            out.append((run, path, load(bench) if os.path.isfile(bench) else None, arg))
    return out


def precision_table(top, precision):
    rows = kept_reports(top, precision)
    lines = ["", f"**{precision}**", ""]
    if not rows:
        return lines + ["(no kept run has this precision's report yet)"]
    plats = [portability.platform(arg) for _, _, _, arg in rows]
    why = portability.deck_mismatch(plats)
    if why:
        raise Refused(f"{precision}: the kept reports are not the same deck: {why}")
    lines += ["| kept run | platform | efficiency | model TFLOP/s a rank | ceiling TFLOP/s | step ms | "
              "PyTorch eager / kformer |", "|---|---|---:|---:|---:|---:|---:|"]
    for (run, path, bench, _), p in zip(rows, plats):
        step = load(path)["summary"].get("step_ms_median")
        ratio = (bench or {}).get("eager", {}).get("torch_over_kformer")
        lines.append(f"| {run} | {p['name']} | {portability.fmt(p['e'], '.3f')} | {portability.fmt(p['tflops'], '.3g')} | "
                     f"{portability.fmt(p['ceiling'], '.3g')} | {portability.fmt(step, '.0f')} | "
                     f"{portability.fmt(ratio, '.2f')} |")
    pp = portability.pennycook([p["e"] for p in plats])
    return lines + ["", "Efficiency, TFLOP/s, ceiling and step (the median over the run's steps) are kformer's report's; "
                    "the ratio is the bench's, each side's median step after its first.",
                    "", f"Pennycook's PP over {len(plats)} platform(s): {pp:.3f}" +
                    (" (one platform: its own efficiency; PP compares platforms as more are kept)" if len(plats) == 1 else "")]


def tables(top):
    return "\n".join(line for p in PRECISIONS for line in precision_table(top, p)).lstrip("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--doc", default=os.path.join(TOP, "docs", "user-guide.md"))
    ap.add_argument("--top", default=TOP, help="where docs/cpu-runs and docs/gpu-runs are (the tests point it elsewhere)")
    a = ap.parse_args()
    try:
        return marked_section.update(a.doc, BEGIN, END, lambda: tables(a.top) + "\n", a.check, "portability_table",
                                     "portability tables", os.path.join(a.top, "docs"))
    except Refused as e:
        print(f"portability_table: {e}", file=sys.stderr)
        return 2

if __name__ == "__main__":
    sys.exit(main())
