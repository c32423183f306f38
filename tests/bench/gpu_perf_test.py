"""scripts/gpu_perf.sh end to end on the CPU (--host, tiny shapes), so that the one command a
GPU session runs does not rot between GPU sessions. Not a timed test: no figure is judged.

Asserts: gpu_perf.sh exits 0 and leaves the files it names (kformer's step reports among them); the
summary has every issue-19 and issue-35 target, each with a verdict, and a figure wherever the CPU
run can give one (GEMM, attention fused against naive, memory-bound, the step against PyTorch
eager, MFU), issue 35's vendor row "not built" (no cuDNN on a CPU); the PyTorch model trains
kformer's model (bench/step_vs_torch_gpu.py's first-loss check, fp32 and bf16) with the decks'
kernels.attention=auto and kernels.gemm=auto, whose choices the step JSON and the summary's step
rows name; attention_vs_sdpa.py recovered the attention case's shape from the benchmark's counters,
in fp32 and for the bf16 cases at head sizes 64 and 128 (its bf16_rows, against SDPA in bf16);
a kernel-bench report cut short is merged with its finished cases; the step's kernel times by family
come with it (output.kernel_times), each memory-bound case with a copy of its own size beside it, and eager's by the same families (torch.profiler, every part of the
model in its family, the attention's backward with its forward); and the GPU mode, without a GPU
or without a bundle (a stand-in nvidia-smi), stops with exit 2 and a summary whose every row says
n/a, with the reason; a kernel-bench part that crashes in a case (a stand-in bench) goes on with
the cases after it and names the case.
Usage: gpu_perf_test.py BINDIR SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

TARGETS = ["gemm-gemm", "gemm-gemm_bf16", "gemm-matmul_bwd", "attention-naive", "attention-sdpa",
           "attention-batched-sdpa", "attention-vendor-sdpa", "memory-fp32",
           "memory-bf16", "step-eager-fp32", "step-compile-fp32", "mfu-fp32", "step-eager-bf16", "step-compile-bf16",
           "mfu-bf16"]
# Rows the CPU run must give a figure for (the others: SDPA needs torch >= 2.0, compile too).
MEASURED_ON_CPU = ["gemm-gemm", "gemm-gemm_bf16", "gemm-matmul_bwd", "attention-naive", "memory-fp32", "memory-bf16",
                   "step-eager-fp32", "mfu-fp32", "step-eager-bf16", "mfu-bf16"]
FILES = {"summary.md", "summary.json", "kernel_bench.json", "sdpa.json", "step_fp32.json", "step_bf16.json",
         "step_fp32_kformer.json", "step_bf16_kformer.json", "gpu_perf.log"}


def check(cond, what, failures):
    if not cond:
        failures.append(what)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def host_run(bindir, src, out, failures):
    env = dict(os.environ, OMP_NUM_THREADS="2", OMP_PROC_BIND="false", PYTHON="/usr/bin/python3")
    p = run([os.path.join(src, "scripts", "gpu_perf.sh"), "--host", bindir, out], env=env)
    print(p.stdout[-3000:])
    if p.returncode != 0:
        failures.append(f"gpu_perf.sh --host exited {p.returncode}: {p.stderr[-1500:]}")
        with open(os.path.join(out, "gpu_perf.log")) as f:
            print(f.read()[-4000:])
        return
    files = set(os.listdir(out))
    check(files == FILES, f"files {sorted(files)}, expected {sorted(FILES)}", failures)

    summary = json.load(open(os.path.join(out, "summary.json")))
    rows = {t["id"]: t for t in summary["targets"]}
    check(list(rows) == TARGETS, f"targets {list(rows)}, expected {TARGETS}", failures)
    md = open(os.path.join(out, "summary.md")).read()
    for tid, t in rows.items():
        check(t["verdict"] in ("PASS", "FAIL", "n/a", "info"), f"{tid}: verdict {t['verdict']}", failures)
        check(f"| {t['target']} | {t['measured']} | {t['verdict']} |" in md, f"{tid}: not in summary.md", failures)
    for tid in MEASURED_ON_CPU:
        t = rows.get(tid, {})
        check(isinstance(t.get("value"), float) and t["value"] > 0 and t["verdict"] != "n/a",
              f"{tid}: no figure on the CPU run: {t}", failures)
    for section in ("## GEMM", "## Attention, fwd+bwd", "## Attention against PyTorch", "## Attention in bf16, fwd+bwd",
                    "## Attention in bf16 against PyTorch SDPA", "## Memory-bound", "## Training step",
                    "## kformer's kernel choices in the step", "## kformer's step by kernel family, measured"):
        check(section in md, f"summary.md lacks its section '{section}'", failures)
    check("relative difference of the results from the nearest other kind's: " in md,
          "summary.md's kernel choices do not say how far auto's candidates lay apart", failures)
    v = rows.get("attention-vendor-sdpa", {})
    check(v.get("verdict") == "n/a" and v.get("measured", "").startswith("not built:"),
          f"the vendor row on a CPU build: {v}", failures)

    for p in ("fp32", "bf16"):
        st = json.load(open(os.path.join(out, f"step_{p}.json")))
        lc = st.get("loss_check") or {}
        check(lc.get("ok") is True, f"step_{p}: first-loss check {lc}", failures)
        check(st["rounds"] == 2 and len(st["kformer"]["step_ms_rounds"]) == 2 and len(st["eager"]["step_ms_rounds"]) == 2,
              f"step_{p}: not two alternating rounds: {st['rounds']}", failures)
        c = st["compile"]
        check(c.get("ok") is False and c.get("error") or c.get("ok") and c.get("step_ms"),
              f"step_{p}: torch.compile neither timed nor explained: {c}", failures)
        # The decks' defaults: kformer chose at start-up, and its report's choice travels to the summary.
        ka, kg = st["kformer"].get("kernels_attention") or {}, st["kformer"].get("kernels_gemm") or {}
        check(st.get("kformer_attention") == "auto" and st.get("kformer_gemm") == "auto" and ka.get("setting") == "auto"
              and ka.get("kind") in ("naive", "fused", "batched_gemm") and kg.get("setting") == "auto"
              and kg.get("impl") in ("native", "vendor"), f"step_{p}: kernels {ka} {kg}", failures)
        # Every kind auto timed was set against the others, and the host's all agree (fp32 1e-3, bf16 5e-2).
        diffs = ka.get("differences") or {}
        check(set(diffs) == set(ka.get("tflops") or {}) and len(diffs) >= 2
              and all(v is not None and v < (5e-2 if p == "bf16" else 1e-3) for v in diffs.values()),
              f"step_{p}: auto's candidates not compared, or apart: {diffs}", failures)
        # One more kformer run with output.kernel_times: the step by kernel family, measured.
        kt = st["kformer"].get("kernel_times") or {}
        fam = kt.get("by_family_ms") or {}
        check("gemm" in fam and "norm" in fam and 0 < kt.get("calls_ms", 0) <= kt.get("step_ms", 0),
              f"step_{p}: no kernel times ({st['kformer'].get('kernel_times_skipped', kt)})", failures)
        # Eager's side of the same: three steps under torch.profiler, by family (bench/torch_families.py).
        # Every one of the model's parts lands in its own family; the attention's backward (torch
        # 1.13 has no SDPA: its matmuls, bmm) follows its forward's label by sequence number.
        tf = st["eager"].get("kernel_families") or {}
        tfam = tf.get("by_family_ms") or {}
        want = {"gemm", "attention", "norm", "activation", "cross_entropy", "embedding", "optimizer", "reduction"}
        check(want <= set(tfam) and all(v >= 0 for v in tfam.values())
              and abs(sum(tfam.values()) - tf.get("total_ms", -1)) <= 1e-6 * tf.get("total_ms", 1),
              f"step_{p}: eager's families {sorted(tfam)} lack {sorted(want - set(tfam))} "
              f"({st['eager'].get('kernel_families_skipped', '')})", failures)
        named = {(r["name"], r["family"]) for r in tf.get("longest", [])}
        check(all(f == "attention" for n, f in named if n == "aten::bmm") and ("aten::addmm", "gemm") in named,
              f"step_{p}: eager's longest operators misfiled: {sorted(named)}", failures)
        measured = rows.get(f"step-eager-{p}", {}).get("measured", "")
        # "attention fused (auto), GEMM vendor (auto)", or "fused/naive (auto)" where the rounds chose differently
        check("; kformer: attention " in measured and "(auto), GEMM " in measured and measured.endswith("(auto))"),
              f"step-eager-{p} does not say what kformer ran: {measured}", failures)
    # Each memory-bound case is also set against a copy of its own bytes per call (what its size allows).
    bench = json.load(open(os.path.join(out, "kernel_bench.json")))["benchmarks"]
    mem = [b for b in bench if "copy_gbps" in b]
    check(mem and all(b.get("copy_same_gbps", 0) > 0 and b.get("vs_same_size", 0) > 0
                      and abs(b["vs_same_size"] * b["copy_same_gbps"] - b["gbps"]) <= 1e-6 * b["gbps"] for b in mem),
          f"memory-bound cases without their same-size copy: {[b['name'] for b in mem if 'vs_same_size' not in b]}",
          failures)
    # A report cut short (a part that ran out of time) keeps its finished cases when merged.
    text = open(os.path.join(out, "kernel_bench.json")).read()
    total = len(json.loads(text)["benchmarks"])
    cut, merged = os.path.join(out, "..", "cut.json"), os.path.join(out, "..", "merged")
    os.makedirs(merged)
    with open(cut, "w") as f:
        f.write(text[:len(text) // 2])
    p = run(["/usr/bin/python3", os.path.join(src, "scripts", "gpu_perf_summary.py"), merged, "--merge-bench", cut])
    kept = len(json.load(open(os.path.join(merged, "kernel_bench.json")))["benchmarks"]) if p.returncode == 0 else 0
    check(0 < kept < total, f"a report cut in half: {kept} of {total} cases kept ({p.stdout} {p.stderr})", failures)

    sdpa = json.load(open(os.path.join(out, "sdpa.json")))
    shapes = [r["shape"] for r in sdpa["rows"]]
    # bench_attention.cpp's T=128 case: 2048 tokens as 16 sequences of 12 heads of 64.
    check(shapes and all(s["B"] * s["H"] == 16 * 12 and s["T"] == 128 and s["hd"] == 64 for s in shapes),
          f"sdpa.json shapes {shapes}: expected B*H = 192, T 128, hd 64", failures)
    # The bf16 cases (gpu_perf.sh's host filter: fused at hd 64 and 128, naive at 64): 2048 tokens
    # as 16 sequences of 12 heads of 64, or of 6 heads of 128.
    b16 = {r["case"]: r for r in sdpa.get("bf16_rows", [])}
    want = {"T128": (192, 64, ("naive", "fused")), "T128/hd128": (96, 128, ("fused",))}
    check(sorted(b16) == sorted(want), f"sdpa.json bf16_rows {sorted(b16)}, expected {sorted(want)}", failures)
    for case, (bh, hd, kinds) in want.items():
        r = b16.get(case, {})
        sh = r.get("shape", {})
        check(sh.get("B") == 16 and sh.get("H", 0) * 16 == bh and sh.get("KV") == sh.get("H") and sh.get("hd") == hd and sh.get("T") == 128 and r.get("dtype") == "bf16"
              and r.get("sdpa_fwd_bwd_ms", 0) > 0 and all((r.get(f"{k}_over_sdpa") or 0) > 0 for k in kinds)
              and r.get("vendor_over_sdpa") is None, f"sdpa.json bf16 row {case}: {r}", failures)


def gpu_mode_cannot_start(src, tmp, failures):
    """GPU mode with a stand-in nvidia-smi that lists no GPU, then one GPU but no bundle: exit 2,
    and a summary with every row n/a and the reason."""
    for name, listing, reason in (("nogpu", "", "no GPU"), ("nobundle", "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)", "no bundle")):
        fake, out = os.path.join(tmp, name + "-bin"), os.path.join(tmp, name)
        os.makedirs(fake)
        with open(os.path.join(fake, "nvidia-smi"), "w") as f:
            f.write(f"#!/bin/sh\necho '{listing}'\n" if listing else "#!/bin/sh\nexit 0\n")
        os.chmod(os.path.join(fake, "nvidia-smi"), 0o755)
        env = dict(os.environ, PATH=fake + ":" + os.environ["PATH"], PYTHON="/usr/bin/python3",
                   KFORMER_BUNDLE_DIR=os.path.join(tmp, "no-bundle"))
        p = run([os.path.join(src, "scripts", "gpu_perf.sh"), out], env=env)
        check(p.returncode == 2, f"gpu_perf.sh ({name}) exited {p.returncode}, expected 2", failures)
        check(reason in p.stdout, f"gpu_perf.sh ({name}) said: {p.stdout[-500:]}", failures)
        try:
            summary = json.load(open(os.path.join(out, "summary.json")))
        except OSError as e:
            failures.append(f"no summary ({name}): {e}")
            continue
        check([t["id"] for t in summary["targets"]] == TARGETS, f"{name} summary: not every target", failures)
        check(all(t["verdict"] in ("n/a", "info") for t in summary["targets"]), f"{name} summary: a verdict without figures",
              failures)
        check(f"Nothing ran: {reason}" in open(os.path.join(out, "summary.md")).read(), f"{name} summary: no reason", failures)


CRASHING_BENCH = r"""#!/bin/bash
# A stand-in kformer-kernel-bench whose memory cases crash (SIGSEGV's exit 139) in b2, then in c3.
filter="" out=""
for a in "$@"; do case "$a" in --benchmark_filter=*) filter=${a#*=};; --benchmark_out=*) out=${a#*=};; esac; done
P=layernorm/fwd/2048x768
if [[ " $* " == *" --benchmark_list_tests "* ]]; then printf "%s\n" $P/a1 $P/b2 $P/c3 $P/d4 | grep -E "$filter"; exit 0; fi
case "$filter" in
  '^('*c3*) printf '{"context":{},"benchmarks":[' >"$out"; exit 139 ;;
  '^('*) printf '{"context":{},"benchmarks":[{"name":"%s/d4","run_name":"%s/d4","real_time":1,"time_unit":"ms"}]}' $P $P >"$out" ;;
  *) printf '{"context":{},"benchmarks":[{"name":"%s/a1","run_name":"%s/a1","real_time":1,"time_unit":"ms"},' $P $P >"$out"
     exit 139 ;;
esac
"""


def crash_resumed(bindir, src, tmp, failures):
    """A kernel-bench part that crashes in a case runs again on the cases after it (twice here),
    each crashed case named, and the merged report holds every case that finished."""
    fake, out = os.path.join(tmp, "crash-bin"), os.path.join(tmp, "crash")
    os.makedirs(fake)
    with open(os.path.join(fake, "kformer-kernel-bench"), "w") as f:
        f.write(CRASHING_BENCH)
    os.chmod(os.path.join(fake, "kformer-kernel-bench"), 0o755)
    os.symlink(os.path.join(bindir, "kformer"), os.path.join(fake, "kformer"))
    env = dict(os.environ, KFORMER_PERF_SKIP="attention_bf16 gemm attention sdpa steps", PYTHON="/usr/bin/python3")
    p = run([os.path.join(src, "scripts", "gpu_perf.sh"), "--host", fake, out], env=env)
    said = p.stdout + p.stderr
    check("exit 139 in layernorm/fwd/2048x768/b2" in said and "exit 139 in layernorm/fwd/2048x768/c3" in said
          and "kernel-memory-rest2 passed" in said, f"gpu_perf.sh after a crash said: {said[-800:]}", failures)
    try:
        names = [b["name"] for b in json.load(open(os.path.join(out, "kernel_bench.json")))["benchmarks"]]
    except (OSError, ValueError, KeyError) as e:
        names = [f"unreadable: {e}"]
    check(names == ["layernorm/fwd/2048x768/a1", "layernorm/fwd/2048x768/d4"],
          f"the merged report after two crashes holds {names}", failures)


def main(bindir, src):
    if run(["/usr/bin/python3", "-c", "import torch"]).returncode != 0:
        print("FAIL: /usr/bin/python3 cannot import torch: run scripts/setup.sh (installs python3-torch)")
        return 1
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        host_run(os.path.abspath(bindir), src, os.path.join(tmp, "host"), failures)
        gpu_mode_cannot_start(src, tmp, failures)
        crash_resumed(os.path.abspath(bindir), src, tmp, failures)
    for f in failures:
        print("FAIL", f)
    print("gpu_perf: " + ("all checks passed" if not failures else f"{len(failures)} check(s) failed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
