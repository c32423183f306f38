#!/usr/bin/python3
"""A step's time by kernel family, measured beside predicted: where a prediction is short or long.

    scripts/kernel_families.py MEASURED.json PREDICTED.json

MEASURED.json: a kformer run's report made with output.kernel_times=true (its summary.kernel_times),
or bench/step_vs_torch_gpu.py's JSON (its kformer.kernel_times: the GPU session's perf/step_PRECISION.json);
from the latter also PyTorch eager's step by the same families (its eager.kernel_families, three steps
under torch.profiler: bench/torch_families.py), two more columns: eager's ms and kformer's over eager's.
PREDICTED.json: `kformer predict` of the same deck and layout (its predicted.kernel_ms_by_family), on
the profile to judge (on a GPU, the same session's calibrate/own.yaml).

Prints one markdown table, ms per step: each family with its measured and predicted time and their
ratio (and eager's, where MEASURED.json has it), longest measured first; the time outside the calls
(measured: communication and the host's own work; predicted: the step less its families); the kernels
in all (eager's: its profiled kernel time); and the step. The measured step is the timed one, each
call fenced, so its launches do not overlap the device's work as an untimed step's do. Exit 2, with one
line, when a file lacks its figures.
"""
import json
import sys


def fail(msg):
    print(f"kernel_families: {msg}", file=sys.stderr)
    sys.exit(2)


def measured(path):
    """kformer's ms by family, outside the calls and the step; eager's by family (None where the file
    has none) and its total."""
    rep = json.load(open(path))
    k = (rep.get("summary") or {}).get("kernel_times") or (rep.get("kformer") or {}).get("kernel_times")
    if not k:
        fail(f"{path} has no kernel times: run kformer with output.kernel_times=true "
             "(or bench/step_vs_torch_gpu.py with --kernel-times)")
    e = (rep.get("eager") or {}).get("kernel_families") or {}
    return k["by_family_ms"], k["outside_calls_ms"], k["step_ms"], e.get("by_family_ms") or None, e.get("total_ms")


def predicted(path):
    rep = json.load(open(path))
    fam = (rep.get("predicted") or {}).get("kernel_ms_by_family")
    step = (rep.get("summary") or {}).get("step_ms_median")
    if fam is None or step is None:
        fail(f"{path} is not a kformer predict report (no predicted.kernel_ms_by_family)")
    rest = step - sum(fam.values())
    return fam, rest if abs(rest) > 1e-9 * step else 0.0, step


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    m_fam, m_out, m_step, e_fam, e_total = measured(sys.argv[1])
    p_fam, p_out, p_step = predicted(sys.argv[2])

    def row(name, m, p, e=None):
        cells = [name, f"{m:.3f}", f"{p:.3f}", f"{p / m:.2f}" if m > 0 else "-"]
        if e_fam:
            cells += [f"{e:.3f}" if e is not None else "-", f"{m / e:.2f}" if e and m else "-"]
        return "| " + " | ".join(cells) + " |"

    head = ["family", "measured ms", "predicted ms", "predicted / measured"] + (["eager ms", "measured / eager"] if e_fam else [])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for f in sorted(set(m_fam) | set(p_fam) | set(e_fam or {}), key=lambda f: -m_fam.get(f, 0)):
        print(row(f, m_fam.get(f, 0.0), p_fam.get(f, 0.0), (e_fam or {}).get(f, 0.0)))
    print(row("outside the calls", m_out, p_out))
    print(row("all kernels", sum(m_fam.values()), sum(p_fam.values()), e_total))
    print(row("step", m_step, p_step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
