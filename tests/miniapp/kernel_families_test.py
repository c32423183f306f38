#!/usr/bin/python3
"""scripts/kernel_families.py on a real pair (not a timed test: no figure's size is judged): a tiny
run with output.kernel_times=true and kformer predict of the same deck. Every family of either
report has its row, each with the two reports' own figures and their ratio; the step row is the
timed step and the predicted one; from bench/step_vs_torch_gpu.py's JSON (the CPU's tiny step) also
eager's families, each row with eager's own figure; a report without kernel times is refused with
exit 2 and one line.
Usage: kernel_families_test.py BINDIR SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

bindir, src = sys.argv[1], sys.argv[2]
kformer = os.path.join(bindir, "kformer")
script = os.path.join(src, "scripts", "kernel_families.py")
env = dict(os.environ, OMP_NUM_THREADS="1", OMP_PROC_BIND="false")
fails = []
with tempfile.TemporaryDirectory() as tmp:
    run, pred = os.path.join(tmp, "run.json"), os.path.join(tmp, "pred.json")
    deck = [os.path.join(src, "input", "tiny.yaml")]
    for cmd in ([kformer, *deck, "train.steps=3", "output.kernel_times=true", f"output.json={run}"],
                [kformer, "predict", *deck, f"predict.machine={src}/input/machines/perlmutter-a100-40gb.yaml",
                 f"output.json={pred}"]):
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}: {p.stderr[-500:]}")
    p = subprocess.run(["/usr/bin/python3", script, run, pred], capture_output=True, text=True)
    print(p.stdout)
    if p.returncode != 0:
        sys.exit(f"FAIL: kernel_families.py exited {p.returncode}: {p.stderr}")
    rows = {}
    for line in p.stdout.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    m = json.load(open(run))["summary"]["kernel_times"]
    pr = json.load(open(pred))
    fam_p = pr["predicted"]["kernel_ms_by_family"]
    for f in set(m["by_family_ms"]) | set(fam_p):
        r = rows.get(f)
        if not r:
            fails.append(f"no row for {f}")
            continue
        mm, pp = m["by_family_ms"].get(f, 0.0), fam_p.get(f, 0.0)
        if abs(float(r[0]) - mm) > 1e-3 or abs(float(r[1]) - pp) > 1e-3:
            fails.append(f"{f}: row {r}, reports {mm} and {pp}")
        if mm > 0 and abs(float(r[2]) - pp / mm) > 0.006:
            fails.append(f"{f}: ratio {r[2]}, not {pp / mm:.2f}")
    step = rows.get("step", ["0", "0"])
    if abs(float(step[0]) - m["step_ms"]) > 1e-3 or abs(float(step[1]) - pr["summary"]["step_ms_median"]) > 1e-3:
        fails.append(f"step row {step}")
    # bench/step_vs_torch_gpu.py's JSON (a GPU session's perf/step_PRECISION.json, here the CPU's tiny
    # step): kformer's kernel times as above, and eager's families beside them, row by row.
    step = os.path.join(tmp, "step.json")
    cmd = ["/usr/bin/python3", os.path.join(src, "bench", "step_vs_torch_gpu.py"), "--kformer", kformer, "--device", "cpu",
           "--shape", "tiny", "--steps", "3", "--warmup", "1", "--rounds", "1", "--compile", "off", "--threads", "1",
           "--root", src, "--json", step]
    q = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if q.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {q.returncode}: {q.stdout[-800:]} {q.stderr[-800:]}")
    q = subprocess.run(["/usr/bin/python3", script, step, pred], capture_output=True, text=True)
    print(q.stdout)
    lines = q.stdout.splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")] if lines else []
    cells = {c[0]: c[1:] for c in ([x.strip() for x in line.strip("|").split("|")] for line in lines[2:])}
    st = json.load(open(step))
    ef = st["eager"]["kernel_families"]
    km = st["kformer"]["kernel_times"]["by_family_ms"]
    if q.returncode != 0 or head[-2:] != ["eager ms", "measured / eager"]:
        fails.append(f"a step JSON: exit {q.returncode}, header {head}")
    for f, ms in ef["by_family_ms"].items():
        r = cells.get(f)
        if not r or abs(float(r[3]) - ms) > 1e-3 or abs(float(r[0]) - km.get(f, 0.0)) > 1e-3:
            fails.append(f"eager {f}: row {r}, JSON {ms} (kformer {km.get(f, 0.0)})")
    if abs(float(cells.get("all kernels", ["0"] * 4)[3]) - ef["total_ms"]) > 1e-3:
        fails.append(f"all kernels row {cells.get('all kernels')}, eager's total {ef['total_ms']}")
    p = subprocess.run(["/usr/bin/python3", script, pred, pred], capture_output=True, text=True)
    if p.returncode != 2 or len(p.stderr.strip().splitlines()) != 1 or "output.kernel_times=true" not in p.stderr:
        fails.append(f"a report without kernel times: exit {p.returncode}, {p.stderr!r}")
if fails:
    sys.exit("FAIL: " + "; ".join(fails))
print("kernel_families: every family's row from the two reports, eager's beside them, and the refusal")
