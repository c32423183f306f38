#!/usr/bin/python3
"""bf16 against fp32 on this machine, each pair measured alternately in one run (issue 16).

    bench/bf16_ratios.py kernels [--rounds 5] [--threads 1]
        the memory-bound kernels (kformer-kernel-bench: <kernel>/<dir>/<shape> beside
        <kernel>_bf16/<dir>/<shape>): per case the best time of each precision over the rounds,
        and fp32/bf16 (the speed-up)
    bench/bf16_ratios.py step [--rounds 3] [--threads 2] [KEY=VALUE ...]
        the training step at the GPT-2 124M shape (input/gpt3-small.yaml, by default at B=1,
        T=256, vendor GEMM, fused attention): median step of each run, bf16/fp32 per round
    bench/bf16_ratios.py memory [KEY=VALUE ...]
        the estimated and measured peak memory of one rank, bf16/fp32, at the activation-
        dominated gpt shape (4 layers, d 768, seq 1024, micro-batch 4, tiny's vocabulary)

The machine is often shared: best-of (kernels) and ratios within a round are what to compare.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.path.join(ROOT, "build", "default", "bin")
STEP = ["input/gpt3-small.yaml", "model.max_seq_len=1024", "train.seq_len=256", "train.global_batch=1",
        "train.micro_batch=1", "train.steps=8", "kernels.gemm=vendor", "kernels.attention=fused"]
MEMORY = ["input/tiny.yaml", "model.n_layers=4", "model.d_model=768", "model.n_heads=12", "model.max_seq_len=1024",
          "train.seq_len=1024", "train.micro_batch=4", "train.global_batch=4", "train.steps=1"]


def env(threads):
    return dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="false")


def kernels(a):
    best = {}
    for r in range(a.rounds):
        for precision in ("", "_bf16") if r % 2 == 0 else ("_bf16", ""):
            flt = r"^(layernorm|rmsnorm|gelu|swiglu|residual|rope|softmax)" + re.escape(precision) + "/"
            out = subprocess.run([os.path.join(BIN, "kformer-kernel-bench"), "--benchmark_filter=" + flt,
                                  "--benchmark_format=json", "--benchmark_min_time=0.1"], env=env(a.threads),
                                 capture_output=True, text=True, check=True).stdout
            for b in json.loads(out[out.index("{"):])["benchmarks"]:
                name = b["name"].split("/min_time")[0].replace("/manual_time", "")
                best[name] = min(best.get(name, float("inf")), b["real_time"])
    print(f"{'case':34s} {'fp32 ms':>9s} {'bf16 ms':>9s} {'fp32/bf16':>9s}")
    for name in sorted(n for n in best if "_bf16" not in n):
        kernel, rest = name.split("/", 1)
        other = f"{kernel}_bf16/{rest}"
        if other in best:
            print(f"{name:34s} {best[name]:9.3f} {best[other]:9.3f} {best[name] / best[other]:9.2f}")


def run_kformer(args, threads, tmp, name):
    path = os.path.join(tmp, name + ".json")
    subprocess.run([os.path.join(BIN, "kformer"), *args, "output.json=" + path, "output.log_every=1000"],
                   cwd=ROOT, env=env(threads), check=True, capture_output=True)
    return json.load(open(path))["summary"]


def step(a):
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            ms = {}
            for p in ("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32"):
                ms[p] = run_kformer(STEP + a.overrides + ["train.precision=" + p], a.threads, tmp, p)["step_ms_median"]
            ratios.append(ms["bf16"] / ms["fp32"])
            print(f"round {r + 1}: fp32 {ms['fp32']:.1f} ms, bf16 {ms['bf16']:.1f} ms, bf16/fp32 {ratios[-1]:.3f}")
    print(f"median bf16/fp32 step: {statistics.median(ratios):.3f}")


def memory(a):
    with tempfile.TemporaryDirectory() as tmp:
        s = {p: run_kformer(MEMORY + a.overrides + ["train.precision=" + p], a.threads, tmp, p)["memory"]
             for p in ("fp32", "bf16")}
    for what in ("estimated_bytes", "peak_bytes"):
        print(f"{what:16s} fp32 {s['fp32'][what] / 1e9:.3f} GB, bf16 {s['bf16'][what] / 1e9:.3f} GB, "
              f"bf16/fp32 {s['bf16'][what] / s['fp32'][what]:.3f}")
    for part in s["fp32"]["estimate_split_bytes"]:
        f, b = s["fp32"]["estimate_split_bytes"][part], s["bf16"]["estimate_split_bytes"][part]
        print(f"  estimate {part:12s} fp32 {f / 1e9:.3f} GB, bf16 {b / 1e9:.3f} GB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["kernels", "step", "memory"])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("overrides", nargs="*", help="deck keys (step, memory)")
    a = ap.parse_intermixed_args()
    {"kernels": kernels, "step": step, "memory": memory}[a.what](a)


if __name__ == "__main__":
    sys.exit(main())
