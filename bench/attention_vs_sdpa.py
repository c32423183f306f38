#!/usr/bin/python3
"""PyTorch's scaled_dot_product_attention at the shapes of kformer-kernel-bench's attention cases
(issue 19, and issue 35 in bf16): causal, forward and forward+backward, beside kformer's attention
kinds from a kformer-kernel-bench JSON report.

    bench/attention_vs_sdpa.py --kernel-bench BENCH.json [--T 2048] [--device cuda|cpu]
        [--dtypes fp32,bf16] [--reps 20] [--warmup 5] [--json OUT]

The cases are attention/<naive|fused>/<KEY> (forward) and attention_bwd/<naive|fused>/<KEY>
(backward alone) with T<T> in KEY; kformer's fwd+bwd is the sum of the two. The shape comes from
KEY where it says it (T<n>, hd<n>, H<n>, KV<n>, B<n>; hd 64 otherwise) and else from the forward
case's own counters: gflops x time = 2 B H hd T (T+1) gives B H (the heads of all sequences; B 1).
With fewer KV heads than query heads, K and V are repeated per query head before the call (GQA
as PyTorch users write it). Input is kformer's packed (B, T, (H + 2 KV) hd) tensor, split and
transposed to (B, heads, T, hd) as a model does, the output transposed back: both inside the
timing, as kformer's cases read and write the packed layout. Median of --reps timed calls after
--warmup more (CUDA events on the GPU).

These cases' kformer figures are fp32, so the ratio kformer fused / SDPA is taken in fp32 (issue
19's target: within 2x); a bf16 SDPA row, if asked for, is for information. Where fused's fp32
runs on the tensor cores (a CUDA build for sm_80+), the bench's fused_cuda_cores cases time its
CUDA-core shape too: kformer_fused_cuda_cores_fwd_bwd_ms and fused_cuda_cores_over_sdpa.

The bf16 cases (attention_bf16[_bwd]/<naive|fused|batched_gemm|vendor>/<KEY>, every T: the bench
registers T 1024 and 2048 on a device, 128 on the host; hd128 in KEY for 6 heads of 128) are set
against SDPA in bf16, like for like, in "bf16_rows": per case the SDPA times and, for each kind
with both directions, kformer_<kind>_fwd_bwd_ms and <kind>_over_sdpa. Every ratio here, fp32 or
bf16, is kformer's time over SDPA's (below 1: kformer faster); issue 35's target, vendor at 0.8
of SDPA's speed or more, is vendor_over_sdpa <= 1 / 0.8 (scripts/gpu_perf_summary.py).

Where torch has no scaled_dot_product_attention (torch < 2.0, the CPU test's), torch_gpt's
explicit softmax(QK^T)V stands in and the report says so.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "reference"))
import torch  # noqa: E402

import torch_gpt  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
KINDS = ("naive", "fused", "batched_gemm", "vendor")
CASE = re.compile(r"^attention(_bwd)?/(naive|fused|fused_cuda_cores|batched_gemm)/(.+)$")
CASE_BF16 = re.compile(r"^attention_bf16(_bwd)?/(" + "|".join(KINDS) + r")/(.+)$")
# bench_attention.cpp's bf16 cases keep d_model 768 (12 heads of 64, 6 of 128), so B and H are
# told apart in their rows (the counters give B x H), as the cuDNN and SDPA calls see them.
D_MODEL_BF16 = 768


def bench_cases(path, T, pattern=CASE):
    """{key: {"fwd"|"bwd": {kind: benchmark}}} of the cases `pattern` names, those with T<T> (None:
    every T)."""
    with open(path) as f:
        report = json.load(f)
    cases = {}
    for b in report.get("benchmarks", []):
        m = pattern.match(b["name"].split("/min_time")[0])
        if not m or b.get("error_occurred") or (T is not None and int(token(m.group(3), "T", 0)) != T):
            continue
        cases.setdefault(m.group(3), {"fwd": {}, "bwd": {}})["bwd" if m.group(1) else "fwd"][m.group(2)] = b
    return cases


def token(key, name, default):
    """The number after `name` in a case key ("T2048/hd128": T -> 2048), else default."""
    m = re.search(r"(?:^|[/_x-])" + name + r"(\d+)(?=$|[/_x-])", key)
    return int(m.group(1)) if m else default


def ms(b):
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ms")]
    return b["real_time"] * scale


def shape_of(key, fwd):
    """(B, H, KV, T, hd) of a case: from its key, else from its forward case's counters."""
    T, hd = token(key, "T", 0), token(key, "hd", 64)
    H, KV, B = token(key, "H", 0), token(key, "KV", 0), token(key, "B", 0)
    if not H or not B:
        # gflops x seconds = the forward's causal FLOPs, 2 (B H) hd T (T+1) (bench_attention.cpp)
        bh = round(fwd["gflops"] * 1e9 * ms(fwd) / 1e3 / (2.0 * hd * T * (T + 1)))
        if H and not B:
            B = max(1, bh // H)
        elif B and not H:
            H = max(1, bh // B)
        else:
            B, H = 1, bh
    return B, H, KV or H, T, hd


def time_ms(device, f, reps, warmup):
    """Median ms of f() over reps calls after warmup calls."""
    times = []
    for i in range(warmup + reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            f()
            end.record()
            end.synchronize()
            t = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            f()
            t = (time.perf_counter() - t0) * 1e3
        if i >= warmup:
            times.append(t)
    return statistics.median(times)


def sdpa_times(device, dtype, shape, reps, warmup):
    """(forward ms, forward+backward ms) of the attention layer on random data."""
    B, H, KV, T, hd = shape
    attend, _ = torch_gpt.attention_impl()
    g = torch.Generator(device=device)
    g.manual_seed(2024)
    qkv = torch.randn(B, T, (H + 2 * KV) * hd, device=device, dtype=dtype, generator=g).requires_grad_(True)
    dout = torch.randn(B, T, H * hd, device=device, dtype=dtype, generator=g)

    def fwd():
        return torch_gpt.causal_attention(qkv, H, KV, hd, attend)

    def fwd_bwd():
        fwd().backward(dout)
        qkv.grad = None

    return time_ms(device, fwd, reps, warmup), time_ms(device, fwd_bwd, reps, warmup)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel-bench", required=True, help="kformer-kernel-bench --benchmark_format=json output")
    ap.add_argument("--T", type=int, default=2048, help="the sequence length of the cases to compare")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--dtypes", default="fp32,bf16", help="comma-separated: fp32 (the compared one), bf16")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="torch's CPU threads (--device cpu)")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    dtypes = a.dtypes.split(",")
    if any(d not in DTYPES for d in dtypes):
        ap.error(f"--dtypes {a.dtypes}: each must be one of {', '.join(DTYPES)}")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("attention_vs_sdpa: --device cuda but torch sees no GPU: run it on the GPU machine, or --device cpu")
    if a.device == "cpu":
        torch.set_num_threads(a.threads)
    cases = bench_cases(a.kernel_bench, a.T)
    cases16 = bench_cases(a.kernel_bench, None, CASE_BF16)
    if not cases and not cases16:
        sys.exit(f"attention_vs_sdpa: {a.kernel_bench} has no attention case at T{a.T} and no attention_bf16 case "
                 f"(run kformer-kernel-bench with --benchmark_filter=attention and --benchmark_format=json)")
    out = {"device": a.device, "gpu": torch.cuda.get_device_name() if a.device == "cuda" else None,
           "torch": torch.__version__, "attention": torch_gpt.attention_impl()[1], "T": a.T, "rows": [],
           "bf16_rows": []}
    print(f"attention_vs_sdpa: {a.device} {out['gpu'] or ''} torch {out['torch']}, {out['attention']}; "
          f"ms, median of {a.reps}; ratio = kformer fused fwd+bwd / SDPA fwd+bwd")
    if cases:  # the fp32 cases' table (absent where gpu_perf.sh skipped them)
        print(f"{'case':18s} {'B,H,KV,T,hd':>20s} {'dtype':>5s} {'sdpa fwd':>9s} {'sdpa f+b':>9s} {'fused f+b':>10s} "
              f"{'naive f+b':>10s} {'fused/sdpa':>10s} {'naive/fused':>11s}")
    for key, c in sorted(cases.items()):
        fused = c["fwd"].get("fused"), c["bwd"].get("fused")
        naive = c["fwd"].get("naive"), c["bwd"].get("naive")
        batched = c["fwd"].get("batched_gemm"), c["bwd"].get("batched_gemm")
        cores = c["fwd"].get("fused_cuda_cores"), c["bwd"].get("fused_cuda_cores")  # fused's CUDA-core shape
        if not all(fused):
            print(f"{key}: no fused forward and backward case in the report: skipped")
            continue
        shape = shape_of(key, fused[0])
        k_fused = ms(fused[0]) + ms(fused[1])
        k_naive = ms(naive[0]) + ms(naive[1]) if all(naive) else None
        k_batched = ms(batched[0]) + ms(batched[1]) if all(batched) else None
        k_cores = ms(cores[0]) + ms(cores[1]) if all(cores) else None
        for d in dtypes:
            fwd, fb = sdpa_times(a.device, DTYPES[d], shape, a.reps, a.warmup)
            row = {"case": key, "shape": dict(zip(("B", "H", "KV", "T", "hd"), shape)), "dtype": d, "sdpa_fwd_ms": fwd,
                   "sdpa_fwd_bwd_ms": fb, "kformer_fused_fwd_ms": ms(fused[0]), "kformer_fused_bwd_ms": ms(fused[1]),
                   "kformer_fused_fwd_bwd_ms": k_fused, "kformer_naive_fwd_bwd_ms": k_naive,
                   "fused_over_sdpa": k_fused / fb if d == "fp32" else None,
                   "naive_over_fused": k_naive / k_fused if k_naive else None,
                   "kformer_batched_gemm_fwd_bwd_ms": k_batched,
                   "batched_gemm_over_sdpa": k_batched / fb if k_batched and d == "fp32" else None,
                   "kformer_fused_cuda_cores_fwd_bwd_ms": k_cores,
                   "fused_cuda_cores_over_sdpa": k_cores / fb if k_cores and d == "fp32" else None}
            out["rows"].append(row)
            ratio = "" if row["fused_over_sdpa"] is None else f"{row['fused_over_sdpa']:.2f}"
            speed = "" if row["naive_over_fused"] is None else f"{row['naive_over_fused']:.2f}"
            print(f"{key:18s} {','.join(map(str, shape)):>20s} {d:>5s} {fwd:9.3f} {fb:9.3f} {k_fused:10.3f} "
                  f"{k_naive if k_naive else float('nan'):10.3f} {ratio:>10s} {speed:>11s}")
    bf16_rows(a, cases16, out)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0 if out["rows"] or out["bf16_rows"] else 1


def bf16_rows(a, cases, out):
    """kformer's bf16 kinds against SDPA in bf16 at each attention_bf16 case's shape (issue 35)."""
    if not cases:
        return
    print(f"attention_vs_sdpa: bf16 against SDPA in bf16; ms, median of {a.reps}; x/sdpa = kformer fwd+bwd / SDPA fwd+bwd")
    print(f"{'case':18s} {'B,H,KV,T,hd':>20s} {'sdpa f+b':>9s} " + " ".join(f"{k + ' f+b':>16s}" for k in KINDS) + " "
          + " ".join(f"{k + '/sdpa':>17s}" for k in KINDS))
    for key, c in sorted(cases.items(), key=lambda kv: (token(kv[0], "T", 0), kv[0])):
        both = {k: (c["fwd"][k], c["bwd"][k]) for k in KINDS if k in c["fwd"] and k in c["bwd"]}
        if not both:
            print(f"{key}: no kind with both a forward and a backward case in the report: skipped")
            continue
        B, H, KV, T, hd = shape_of(key, next(iter(both.values()))[0])  # the same shape for every kind
        if B == 1 and KV == H and H % (D_MODEL_BF16 // hd) == 0:  # B x H from the counters: split as the bench did
            B, H = H // (D_MODEL_BF16 // hd), D_MODEL_BF16 // hd
            KV = H
        shape = (B, H, KV, T, hd)
        fwd, fb = sdpa_times(a.device, torch.bfloat16, shape, a.reps, a.warmup)
        row = {"case": key, "shape": dict(zip(("B", "H", "KV", "T", "hd"), shape)), "dtype": "bf16",
               "sdpa_fwd_ms": fwd, "sdpa_fwd_bwd_ms": fb}
        for k in KINDS:
            t = ms(both[k][0]) + ms(both[k][1]) if k in both else None
            row[f"kformer_{k}_fwd_bwd_ms"] = t
            row[f"{k}_over_sdpa"] = t / fb if t else None
        out["bf16_rows"].append(row)
        print(f"{key:18s} {','.join(map(str, shape)):>20s} {fb:9.3f} "
              + " ".join(f"{fmt(row[f'kformer_{k}_fwd_bwd_ms'], '16.3f')}" for k in KINDS) + " "
              + " ".join(f"{fmt(row[f'{k}_over_sdpa'], '17.2f')}" for k in KINDS))


def fmt(x, spec):
    """x formatted, or a dash as wide as the spec's width."""
    return format("-", ">" + spec.split(".")[0]) if x is None else format(x, spec)


if __name__ == "__main__":
    sys.exit(main())
