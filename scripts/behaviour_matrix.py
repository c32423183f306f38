#!/usr/bin/python3
"""Behaviour matrix: records what a kformer binary does on a matrix of decks and layouts, timing-free,
and compares two such records (issue 25, "Behaviour unchanged").

`run` trains every deck in input/ at a reduced size, both families and precisions, each pipeline
schedule at pp=2, ZeRO 0-3 at dp=2, tp=2, recompute none/selective/full, sequence parallelism, a bf16
gradient reduce, a checkpoint saved at tp=2 and resumed at pp=2 and at dp=2 ZeRO-3, and runs
`--dry-run` and `kformer predict` (shipped machine profiles): 41 cases, about 1 minute on the 2-core
development machine. Each case's record holds the command, the exit code, the stdout up to the
first iteration (the resolved deck with each value's source, the mesh, the memory estimate; all of
it for dry-run and predict), stderr's `kformer` lines, every field of the JSON report (per-iteration
losses and gradient norms as exact doubles) except the timings and machine measurements in EXCLUDED,
and for a saved checkpoint its checkpoint.json (per-tensor checksums) and each file's sha256. Runs
are made deterministic: kernels.gemm=native (auto picks by start-up timing), OMP_NUM_THREADS=1,
fixed rank counts, KFORMER_MACHINE and KFORMER_COMM_STRICT unset, and relative paths inside the
output folder, so no temporary path reaches the record. The decks are this checkout's input/, so
two binaries are run on the same decks.

`compare` prints one row per case: identical, or which fields differ (-v: each differing value);
exit 1 if any case differs.

  scripts/behaviour_matrix.py run --kformer BEFORE_BINARY --out /tmp/bm_before
  scripts/behaviour_matrix.py run --kformer AFTER_BINARY --out /tmp/bm_after [--only REGEX]
  scripts/behaviour_matrix.py compare /tmp/bm_before/record.json /tmp/bm_after/record.json
  scripts/behaviour_matrix.py list
  scripts/behaviour_matrix.py run --kformer BIN --out /tmp/bm_lr -- train.lr=2e-3   # plant a difference

Extra key=value arguments after `--` are added to every training and dry-run case. To re-derive
the exclusions, record one binary twice with --no-exclude and compare the two records.
"""
import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root"]
PROFILE = "input/machines/h100-sxm-80gb.yaml"
PROFILE2 = "input/machines/perlmutter-a100-40gb.yaml"

# Every case: the same few steps, the portable GEMM (auto times both at start-up and may flip).
COMMON = ["kernels.gemm=native", "train.steps=3", "output.log_every=1"]

# Each deck at a reduced size: the deck's family, layout, attention, recompute and SP kept, the
# shape cut to seconds per case. np is the rank count the deck's layout needs.
SMALL = ["model.n_layers=2", "model.d_model=64", "model.vocab_size=256", "model.max_seq_len=64", "train.seq_len=32"]
DECKS = {
    "tiny": (1, []),
    "gpt3-small": (1, SMALL + ["model.n_heads=4", "train.global_batch=4", "train.micro_batch=2"]),
    "ezpz-8layer": (1, SMALL + ["model.n_heads=4", "model.n_kv_heads=2", "train.global_batch=4"]),
    "llama3-8b": (4, SMALL + ["model.n_heads=8", "model.n_kv_heads=4", "model.ffn_dim=128"]),
    "qwen3-8b": (4, SMALL + ["model.n_heads=8", "model.n_kv_heads=4", "model.ffn_dim=96"]),
}

# Layout and feature cases run on input/tiny.yaml (4 layers, d_model 64, 4 heads).
TINY = "input/tiny.yaml"


def cases():
    """(name, kind, np, args, needs): kind train | dry-run | predict; needs = a case run first."""
    out = []
    for deck, (np, red) in DECKS.items():
        out.append((f"deck {deck}", "train", np, [f"input/{deck}.yaml"] + red, None))
    for fam in ["gpt", "llama"]:
        for prec in ["fp32", "bf16"]:
            extra = ["model.n_kv_heads=2"] if fam == "llama" else []
            out.append((f"{fam} {prec}", "train", 1,
                        [TINY, f"model.family={fam}", f"train.precision={prec}"] + extra, None))
    for sched in ["1f1b", "gpipe", "interleaved", "zb-h1"]:
        extra = ["parallel.virtual_stages=2"] if sched == "interleaved" else []
        out.append((f"pp=2 {sched}", "train", 2, [TINY, "parallel.pp=2", f"parallel.schedule={sched}"] + extra,
                    None))
    for z in range(4):
        out.append((f"dp=2 zero={z}", "train", 2, [TINY, "parallel.dp=2", f"parallel.zero={z}"], None))
    out.append(("tp=2", "train", 2, [TINY, "parallel.tp=2"], None))
    for rc in ["none", "selective", "full"]:
        out.append((f"recompute {rc}", "train", 1, [TINY, f"train.recompute={rc}"], None))
    out.append(("tp=2 sp", "train", 2, [TINY, "parallel.tp=2", "parallel.sequence_parallel=true"], None))
    out.append(("dp=2 grad_reduce bf16", "train", 2,
                [TINY, "parallel.dp=2", "train.precision=bf16", "parallel.grad_reduce_dtype=bf16"], None))
    out.append(("llama bf16 tp=2 sp zero=3 dp=2 recompute full", "train", 4,
                [TINY, "model.family=llama", "model.n_kv_heads=2", "train.precision=bf16", "parallel.tp=2",
                 "parallel.sequence_parallel=true", "parallel.dp=2", "parallel.zero=3",
                 "train.recompute=full"], None))
    # Checkpoint: 2 of 4 iterations at tp=2, saved; the rest resumed at pp=2 (and at dp=2 zero=3).
    ck = [TINY, "train.steps=4"]
    out.append(("ckpt save tp=2", "train", 2, ck + ["parallel.tp=2", "train.stop_at=2", "checkpoint.save=ck"],
                None))
    out.append(("ckpt resume pp=2", "train", 2, ck + ["parallel.pp=2", "checkpoint.load=../ckpt_save_tp_2/ck"],
                "ckpt save tp=2"))
    out.append(("ckpt resume dp=2 zero=3", "train", 2,
                ck + ["parallel.dp=2", "parallel.zero=3", "checkpoint.load=../ckpt_save_tp_2/ck"],
                "ckpt save tp=2"))
    out.append(("ckpt uninterrupted", "train", 2, ck + ["parallel.tp=2"], None))
    # --dry-run: each reduced deck, and a pp=2 interleaved layout.
    for deck, (np, red) in DECKS.items():
        out.append((f"dry-run {deck}", "dry-run", np, [f"input/{deck}.yaml"] + red, None))
    out.append(("dry-run pp=2 interleaved", "dry-run", 2,
                [TINY, "parallel.pp=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2"], None))
    # predict: full-size decks (nothing is allocated), shipped profiles.
    for deck in DECKS:
        out.append((f"predict {deck}", "predict", 1, [f"input/{deck}.yaml", f"predict.machine={PROFILE}"], None))
    out.append(("predict llama3-8b 4096 ranks a100", "predict", 1,
                ["input/llama3-8b.yaml", "predict.world=4096", "parallel.tp=8", "parallel.pp=8", "parallel.dp=0",
                 "train.global_batch=1024", "train.micro_batch=1", f"predict.machine={PROFILE2}"], None))
    out.append(("predict gpt3-small pp=4 zb-h1 bf16", "predict", 1,
                ["input/gpt3-small.yaml", "predict.world=16", "parallel.pp=4", "parallel.schedule=zb-h1",
                 "train.precision=bf16", "parallel.zero=1", f"predict.machine={PROFILE}"], None))
    return out


# Report fields left out of the record, as regular expressions over the flattened path (list
# indices written [*]), each with why. Found by recording the matrix twice on one binary with
# --no-exclude and comparing (every field below changed between the two, except the platform
# strings and the report's path, which change between builds and folders).
EXCLUDED = [
    (r"^iterations\[\*\]\.(elapsed_ms|samples_per_s|tokens_per_s|tflops_per_rank)$", "wall-clock time and rates"),
    (r"^iterations\[\*\]\.time_split_ms\.", "wall-clock time split"),
    (r"^iterations\[\*\]\.rank_(busy_ms|comm_ms|bubble|compute_ms|stretch_ms)\[\*\]$",
     "per-rank measured times, bubble, compute and a straggler's sleep"),
    (r"^summary\.(step_ms_median|tokens_per_s|model_tflops_per_rank|hardware_tflops_per_rank)$", "time and rates"),
    (r"^summary\.(mfu|mfu_fma_peak|mfu_vendor|hfu)$", "MFU: measured rate over measured ceiling"),
    (r"^summary\.time_split_ms\.", "wall-clock time split"),
    (r"^summary\.fma_peak_tflops$", "FMA peak measured at start-up"),
    (r"^summary\.fma_peak\.launch_ms$", "launch time measured at start-up"),
    (r"^summary\.fma_peak\.chains_per_item$", "the chain count that timed fastest at start-up"),
    (r"^summary\.gemm_ceiling_tflops$", "GEMM rate measured at start-up"),
    (r"^summary\.(gemm_ceiling|kernels_gemm)\.(native_tflops|vendor_tflops|of_fma_peak)$",
     "GEMM rates measured at start-up"),
    (r"^summary\.kernels_attention\.(reason|tflops\..*|differences\..*)$", "attention rates measured at start-up (kernels.attention=auto)"),
    (r"^summary\.gemm_ceiling\.impl$", "the GEMM that measured faster at start-up (flips between runs)"),
    (r"^summary\.pipeline\.(bubble_measured|micro_batches_in_flight_measured)$", "measured from timestamps"),
    (r"^summary\.(straggler|straggler_comm)\.(delay|slowdown|slowest_rank)$", "measured from per-rank times"),
    (r"^summary\.memory\.peak_bytes$", "process peak memory: allocator, MPI and library buffers"),
    (r"^platform\.(git|host|host_cpu)$", "build's git hash and this machine's name and CPU"),
    (r"^platform\.kformer_version$", "version string of the build"),
    (r"^config\.output\.json$", "the report's own path"),
]
# Fields left out only where a condition on the report holds: (path regex, condition, reason).
EXCLUDED_WHEN = [
    (r"^summary\.memory\.(activation_bytes_measured|allocated_peak_bytes)$",
     lambda r: r.get("config.parallel.schedule") == "zb-h1" and r.get("config.parallel.pp", 1) > 1,
     "zb-h1 at pp>1: the measured activation and allocation peaks changed between two runs of one binary "
     "(1.87 MB and 1.25 MB of activations); deterministic for the other schedules"),
]
# predict's figures are predictions from the profile (deterministic): only its own run time goes.
EXCLUDED_PREDICT = [
    (r"^platform\.(git|host|host_cpu|kformer_version)$", "build's git hash and this machine"),
    (r"^config\.output\.json$", "the report's own path"),
]
# Text (stdout): lines before the first iteration line (the resolved deck with each value's source,
# the mesh, the memory estimate) and every line of dry-run and predict are kept, less TEXT_DROP;
# after the first iteration line only unindented lines (checkpoint saves and resumes) are kept.
# Parts of kept lines that are times: (regex, replacement, reason).
TEXT_MASK = [
    (r" in [0-9.e+-]+ s, [0-9.e+-]+ MB/s\)", " in <time>)", "checkpoint save: seconds and MB/s"),
    (r" in [0-9.e+-]+ s;", " in <time>;", "checkpoint resume: seconds"),
    (r"(= auto -> \w+) \([^)]*TFLOP/s[^)]*\)", r"\1 (<rates>)", "kernels.attention=auto: the rates measured at start-up"),
]
# Lines dropped: (regex, kinds of case, reason). predict's FOM and summary are predictions from
# the profile, so they stay.
TEXT_DROP = [
    (r"^\s*iteration\s+\d+/", "train", "iteration lines: loss and grad norm are in the report, the rest are times"),
    (r"^FOM:", "train", "figure of merit: a measured rate"),
    (r"^summary \(medians", "train", "summary block (its indented lines go too): measured times, rates and peaks"),
    (r"^  predicted in [0-9.e+-]+ s$", "predict", "predict's own run time"),
]


def safe(name):
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")


def flatten(x, path, out):
    if isinstance(x, dict):
        for k, v in x.items():
            flatten(v, f"{path}.{k}" if path else k, out)
    elif isinstance(x, list) and any(isinstance(v, (dict, list)) for v in x):
        for i, v in enumerate(x):
            flatten(v, f"{path}[{i}]", out)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out[f"{path}[{i}]"] = v
        if not x:
            out[path] = []
    else:
        out[path] = x


def excluded(path, rules):
    generic = re.sub(r"\[\d+\]", "[*]", path)
    return any(re.search(rx, generic) for rx, _ in rules)


def keep_text(lines, kind, exclude=True):
    if not exclude:
        return list(lines)
    kept, trained = [], False
    for ln in lines:
        trained = trained or (kind == "train" and re.match(TEXT_DROP[0][0], ln) is not None)
        if any(k == kind and re.search(rx, ln) for rx, k, _ in TEXT_DROP):
            continue
        if trained and ln.startswith(" "):
            continue  # the summary block's lines: measured times, rates, ceilings and peaks
        for rx, rep, _ in TEXT_MASK:
            ln = re.sub(rx, rep, ln)
        kept.append(ln)
    return kept


def checkpoint_record(ckdir):
    """Every saved iteration's checkpoint.json (per-tensor checksums, data position, optimizer step,
    saved layout, deck) and the sha256 of each file in it: the state a resume starts from."""
    rec = {}
    for root, _, files in sorted(os.walk(ckdir)):
        rel = os.path.relpath(root, ckdir)
        for fn in sorted(files):
            path = os.path.join(root, fn)
            key = fn if rel == "." else f"{rel}/{fn}"
            if fn == "checkpoint.json":
                with open(path) as f:
                    flatten(json.load(f), key, rec)
            else:
                with open(path, "rb") as f:
                    rec[f"{key}:sha256"] = hashlib.sha256(f.read()).hexdigest()
    return rec


CK_EXCLUDED = [(r"checkpoint\.json\.(git|kformer_version)$", "build's git hash and version string")]


def run_case(kformer, out, case, extra, env, exclude=True):
    name, kind, np, args, _ = case
    d = os.path.join(out, "cases", safe(name))
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    os.symlink(os.path.join(REPO, "input"), os.path.join(d, "input"))
    a = [args[0]] + COMMON + list(args[1:]) + extra
    if kind == "predict":
        a = ["predict"] + list(args) + ["output.json=report.json"]
    elif kind == "dry-run":
        a = ["--dry-run"] + a
    else:
        a = a + ["output.json=report.json"]
    cmd = ([*MPIRUN, "-n", str(np)] if np > 1 else []) + [kformer] + a
    t0 = time.time()
    p = subprocess.run(cmd, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    secs = time.time() - t0
    with open(os.path.join(d, "stdout.txt"), "w") as f:
        f.write(p.stdout)
    with open(os.path.join(d, "stderr.txt"), "w") as f:
        f.write(p.stderr)
    rec = {"command": ([f"mpirun -n {np}"] if np > 1 else []) + ["kformer"] + a, "kind": kind, "exit": p.returncode,
           "text": keep_text(p.stdout.splitlines(), kind, exclude),
           "errors": [ln for ln in p.stderr.splitlines() if ln.startswith("kformer")]}
    rp = os.path.join(d, "report.json")
    if os.path.exists(rp):
        flat = {}
        with open(rp) as f:
            flatten(json.load(f), "", flat)
        rules = (EXCLUDED_PREDICT if kind == "predict" else EXCLUDED) if exclude else []
        if exclude and kind == "train":
            rules = rules + [(rx, why) for rx, when, why in EXCLUDED_WHEN if when(flat)]
        rec["report"] = {k: v for k, v in flat.items() if not excluded(k, rules)}
    ck = os.path.join(d, "ck")
    if os.path.isdir(ck):
        rules = CK_EXCLUDED if exclude else []
        rec["checkpoint"] = {k: v for k, v in checkpoint_record(ck).items() if not excluded(k, rules)}
    return rec, secs


def cmd_run(ns):
    kformer = os.path.abspath(ns.kformer)
    if not os.access(kformer, os.X_OK):
        sys.exit(f"behaviour_matrix: {ns.kformer} is not an executable file: give the kformer binary with --kformer")
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_PROC_BIND="false")
    for var in ["KFORMER_MACHINE", "KFORMER_COMM_STRICT"]:
        env.pop(var, None)  # predict's default profile, the comm rules: the deck alone decides
    os.makedirs(ns.out, exist_ok=True)
    sel = [c for c in cases() if not ns.only or re.search(ns.only, c[0])]
    names = {c[0] for c in sel}
    for c in list(sel):
        if c[4] and c[4] not in names:
            sys.exit(f"behaviour_matrix: case '{c[0]}' needs '{c[4]}' first: widen --only")
    record, t0 = {"cases": {}}, time.time()
    for c in sel:
        rec, secs = run_case(kformer, ns.out, c, ns.extra, env, not ns.no_exclude)
        record["cases"][c[0]] = rec
        print(f"{c[0]:<48} exit {rec['exit']}  {secs:6.1f} s", flush=True)
    total = time.time() - t0
    path = os.path.join(ns.out, "record.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1)  # cases in matrix order, fields in report order
    print(f"{len(sel)} cases in {total:.0f} s; record: {path}")
    bad = [n for n, r in record["cases"].items() if r["exit"] != 0]
    if bad:
        print("non-zero exit: " + ", ".join(bad))
    return 0


def diff_fields(a, b):
    """Names of the differing parts of two case records (report fields by path)."""
    out = []
    for part in ["command", "exit", "text", "errors"]:
        if a.get(part) != b.get(part):
            out.append(part)
    for part in ["report", "checkpoint"]:
        ra, rb = a.get(part, {}), b.get(part, {})
        keys = sorted(set(ra) | set(rb))
        out += [f"{part}:{k}" for k in keys if ra.get(k, "<absent>") != rb.get(k, "<absent>")]
    return out


def summarise(fields, width):
    """One line: report fields with iterations[i] collapsed to iterations[*] (and a count), the
    checkpoint's differing fields as one count."""
    groups, nck = {}, 0
    for f in fields:
        if f.startswith("checkpoint:"):
            nck += 1
            continue
        g = re.sub(r"\[\d+\]", "[*]", f.removeprefix("report:"))
        groups[g] = groups.get(g, 0) + 1
    parts = [g + (f" (x{n})" if n > 1 else "") for g, n in groups.items()]
    if nck:
        parts.append(f"checkpoint ({nck} fields)")
    s = ", ".join(parts)
    return s if len(s) <= width else s[:width - 3] + "..."


def current_rules(rec):
    """A record as this script's rules would have kept it: a record made before an exclusion or a
    mask was added compares under today's rules."""
    rec = dict(rec)
    kind = rec.get("kind")
    if "report" in rec:
        rules = EXCLUDED_PREDICT if kind == "predict" else EXCLUDED
        if kind == "train":
            rules = rules + [(rx, why) for rx, when, why in EXCLUDED_WHEN if when(rec["report"])]
        rec["report"] = {k: v for k, v in rec["report"].items() if not excluded(k, rules)}
    text = []
    for ln in rec.get("text", []):
        for rx, rep, _ in TEXT_MASK:
            ln = re.sub(rx, rep, ln)
        text.append(ln)
    rec["text"] = text
    return rec


def cmd_compare(ns):
    with open(ns.a) as f:
        a = {n: current_rules(r) for n, r in json.load(f)["cases"].items()}
    with open(ns.b) as f:
        b = {n: current_rules(r) for n, r in json.load(f)["cases"].items()}
    names = list(a) + [n for n in b if n not in a]
    w = max(len(n) for n in names) + 2
    print(f"{'case':<{w}}result")
    ndiff = 0
    for n in names:
        if n not in a or n not in b:
            res = "only in " + (ns.a if n in a else ns.b)
        else:
            fields = diff_fields(a[n], b[n])
            res = "identical" if not fields else "DIFFERS: " + summarise(fields, ns.width)
        ndiff += res != "identical"
        print(f"{n:<{w}}{res}")
    print(f"{len(names) - ndiff} of {len(names)} cases identical")
    if ns.verbose:
        for n in names:
            if n in a and n in b:
                for fld in diff_fields(a[n], b[n]):
                    part, _, key = fld.partition(":")
                    if key:
                        print(f"  {n} | {fld}: {a[n][part].get(key)!r} -> {b[n][part].get(key)!r}")
                        continue
                    va, vb = a[n].get(part), b[n].get(part)
                    if isinstance(va, list) and isinstance(vb, list):
                        for ln in difflib.unified_diff(va, vb, lineterm="", n=0):
                            if ln[:1] in "-+" and ln[:3] not in ("---", "+++"):
                                print(f"  {n} | {part}: {ln}")
                    else:
                        print(f"  {n} | {part}: {va!r} -> {vb!r}")
    return 1 if ndiff else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the matrix with one binary and write OUT/record.json")
    r.add_argument("--kformer", default=os.path.join(REPO, "build/default/bin/kformer"),
                   help="the binary to record (default: this checkout's build/default/bin/kformer)")
    r.add_argument("--out", required=True, help="folder for record.json and each case's files")
    r.add_argument("--only", help="regular expression: run only the cases whose name matches")
    r.add_argument("--no-exclude", action="store_true",
                   help="record every field and line (two such records of one binary show what to exclude)")
    r.add_argument("extra", nargs="*", help="key=value added to every training and dry-run case (after --)")
    c = sub.add_parser("compare", help="compare two records; exit 1 if any case differs")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("-v", "--verbose", action="store_true", help="print each differing value")
    c.add_argument("--width", type=int, default=140, help="longest field list per row")
    sub.add_parser("list", help="list the cases")
    ns = ap.parse_args()
    if ns.cmd == "run":
        return cmd_run(ns)
    if ns.cmd == "compare":
        return cmd_compare(ns)
    for name, kind, np, args, _ in cases():
        print(f"{name:<48} {kind:<8} np={np}  {' '.join(args)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
