#!/usr/bin/python3
"""Issue 19's and issue 35's targets from the JSONs scripts/gpu_perf.sh writes: one markdown table
with every target, its measured ratio and a verdict, then the per-case figures behind each row.

    scripts/gpu_perf_summary.py DIR [--steps steps.tsv] [--error WHY] [--md summary.md] [--json summary.json]
    scripts/gpu_perf_summary.py DIR --merge-bench PART...   (gpu_perf.sh's kernel-bench runs -> DIR/kernel_bench.json)

Prints the targets table; --md gets it with the per-case figures behind it.

DIR holds (any may be missing: its rows then say n/a and why):
  kernel_bench.json   kformer-kernel-bench --benchmark_out: GEMM, attention (fp32 and bf16),
                      memory-bound cases
  sdpa.json           bench/attention_vs_sdpa.py --json (rows: the fp32 cases; bf16_rows: the bf16 ones)
  step_fp32.json, step_bf16.json   bench/step_vs_torch_gpu.py --json
--steps: gpu_perf.sh's steps (name, kind, rc, seconds, note a line): failures and time-outs.
--error: why nothing could run (gpu_perf.sh could not start), noted above the table.
Targets: native GEMM >= 0.5 of the vendor's (cuBLAS on the GPU) at every layer shape; fused
attention >= 3x naive (fwd+bwd) and within 2x of SDPA's time, at the longest T present (2048 on
the GPU); every memory-bound kernel >= 0.6 of the copy bandwidth measured in the same loop;
kformer's step no slower than PyTorch eager; MFU (no threshold stated: reported). Issue 35:
vendor (cuDNN) attention fwd+bwd at 0.8 of PyTorch SDPA's speed or more in bf16 (SDPA's time over
vendor's) at T 1024 and 2048 with head size 64 and 128 (n/a "not built" where the bench has no
vendor case: no CUDA with cuDNN; n/a while a shape is missing and none fails); the step rows say
which attention and GEMM kformer ran (its report's summary.kernels_attention and kernels_gemm:
kernels.attention=auto and kernels.gemm=auto choose at start-up).
Verdicts: PASS, FAIL, n/a (no figure: the reason is in the measured column), info.
"""
import argparse
import json
import os
import re
import sys

GEMM_MIN, ATTN_NAIVE_MIN, ATTN_SDPA_MAX, MEM_MIN, STEP_MIN = 0.5, 3.0, 2.0, 0.6, 1.0
VENDOR_SDPA_MIN = 0.8  # issue 35: vendor attention at 0.8 of SDPA's speed or more
ATTN_KINDS = ("naive", "fused", "batched_gemm", "vendor")
ATTN = re.compile(r"^attention(_bwd)?/(naive|fused|fused_cuda_cores|batched_gemm)/(.+)$")
# bench_attention.cpp's bf16 cases: <kind>/T<T> (12 heads of 64) and <kind>/T<T>/hd128 (6 of 128).
ATTN_BF16 = re.compile(r"^attention_bf16(_bwd)?/(" + "|".join(ATTN_KINDS) + r")/(T\d+(?:/hd\d+)?)$")
VENDOR_SHAPES = ("T1024", "T2048", "T1024/hd128", "T2048/hd128")  # issue 35's, as the bench names them
GEMM = re.compile(r"^(gemm|gemm_bf16|matmul_bwd)/(native|vendor)/(\d+x\d+x\d+)$")


def load(d, name):
    try:
        with open(os.path.join(d, name)) as f:
            return json.load(f), None
    except FileNotFoundError:
        return None, f"no {name}"
    except (OSError, ValueError) as e:
        return None, f"{name} unreadable: {e}"


def read_bench_part(path):
    """A kformer-kernel-bench JSON report, also one cut short (a time-out): its context and every
    benchmark written in full; (None, reason) when nothing can be read."""
    try:
        text = open(path).read()
    except OSError as e:
        return None, str(e)
    try:
        return json.loads(text), None
    except ValueError:
        pass
    dec, out = json.JSONDecoder(), {"benchmarks": []}
    m = re.search(r'"context"\s*:\s*', text)
    if m:
        try:
            out["context"] = dec.raw_decode(text, m.end())[0]
        except ValueError:
            pass
    m = re.search(r'"benchmarks"\s*:\s*\[\s*', text)
    pos = m.end() if m else len(text)
    while pos < len(text):
        try:
            b, pos = dec.raw_decode(text, pos)
        except ValueError:
            break
        out["benchmarks"].append(b)
        pos = re.compile(r"\s*,?\s*").match(text, pos).end()
    return out, f"{path} was cut short: {len(out['benchmarks'])} case(s) kept"


def merge_bench(parts, dest):
    """The parts' benchmarks in one report (the first context) at dest."""
    merged = {"context": {}, "benchmarks": []}
    for p in parts:
        r, why = read_bench_part(p)
        if why:
            print(f"gpu_perf_summary: {why}")
        if r:
            merged["context"] = merged["context"] or r.get("context", {})
            merged["benchmarks"] += r.get("benchmarks", [])
    with open(dest, "w") as f:
        json.dump(merged, f, indent=1)
    print(f"gpu_perf_summary: {len(merged['benchmarks'])} case(s) from {len(parts)} report(s) in {dest}")


def remaining(part, listing):
    """After a kernel-bench run that crashed: the case it crashed in (the first listed case its
    report lacks) and a filter for the listed cases after it, so that one case's crash does not
    cost the rest of the part. Prints 'crashed NAME' and the filter, or nothing when none is left."""
    r, _ = read_bench_part(part)
    done = {b.get("run_name", b.get("name")) for b in (r or {}).get("benchmarks", [])}
    with open(listing) as f:
        names = [n.strip() for n in f if re.match(r"^[A-Za-z_][^ ]*/", n.strip())]
    left = [n for n in names if n not in done]
    if not left:
        return
    print("crashed", left[0])
    if left[1:]:
        print("^(" + "|".join(re.escape(n) for n in left[1:]) + ")$")


def report_mfu_only(st):
    """Whether a step JSON's own TFLOP/s are over the kernels' causal FLOPs (a run before session 50)
    with kformer's report's MFU kept beside them: then MFU's convention (docs/figures.md: the model's
    FLOPs, Megatron-LM's and PaLM's) is the report's figure."""
    return st.get("flops_basis") != "model" and st.get("kformer", {}).get("mfu_report") is not None


def ms(b):
    return b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ms")]


def bench_cases(kb):
    """{name without the /min_time... suffix: benchmark}, the failed ones left out."""
    out = {}
    for b in (kb or {}).get("benchmarks", []):
        if not b.get("error_occurred") and b.get("run_type", "iteration") == "iteration":
            out[b["name"].split("/min_time")[0]] = b
    return out


class Summary:
    def __init__(self):
        self.targets, self.details = [], []

    def target(self, tid, text, measured, verdict, **extra):
        self.targets.append({"id": tid, "target": text, "measured": measured, "verdict": verdict, **extra})

    def table(self, title, header, rows):
        self.details.append((title, header, rows))


def verdict(ok):
    return "PASS" if ok else "FAIL"


def gemm_rows(s, cases, why):
    """Native against vendor per layer shape: fp32 forward (the paired sgemm: vs_ceiling), bf16
    forward (the two bf16 cases' times), fp32 backward (dx, dW: vs_ceiling against the sgemm pair)."""
    by = {}
    for name, b in cases.items():
        m = GEMM.match(name)
        if m:
            by.setdefault((m.group(1), m.group(3)), {})[m.group(2)] = b
    rows, worst = [], {}
    for (kind, shape), v in sorted(by.items()):
        nat, ven = v.get("native"), v.get("vendor")
        if nat is None:
            continue
        if kind == "gemm_bf16":  # its vs_ceiling is bf16 over fp32 of the same impl: compare the times
            ratio = ms(ven) / ms(nat) if ven else None
        else:
            ratio = nat.get("vs_ceiling")
        # The vendor's rate: its own case, else (fp32) the sgemm paired with the native case.
        vendor_rate = ven.get("gflops") if ven else nat.get("ceiling_gflops") if kind != "gemm_bf16" else None
        rows.append([kind, shape, f"{nat.get('gflops', 0):.1f}", "-" if vendor_rate is None else f"{vendor_rate:.1f}",
                     "-" if ratio is None else f"{ratio:.3f}"])
        if ratio is not None and (kind not in worst or ratio < worst[kind][0]):
            worst[kind] = (ratio, shape)
    labels = {"gemm": "fp32 forward", "gemm_bf16": "bf16 forward", "matmul_bwd": "fp32 backward (dx, dW)"}
    for kind, label in labels.items():
        text = f"native GEMM >= {GEMM_MIN} of the vendor's (cuBLAS), {label}, every layer shape"
        if kind in worst:
            r, shape = worst[kind]
            n = sum(1 for row in rows if row[0] == kind)
            s.target(f"gemm-{kind}", text, f"{r:.3f} (worst of {n}: {shape})", verdict(r >= GEMM_MIN), value=r)
        else:
            s.target(f"gemm-{kind}", text, why or f"no {kind}/native and /vendor cases", "n/a")
    s.table("GEMM: native against vendor (GFLOP/s; ratio = native speed over vendor's)",
            ["cases", "shape (tokens x in x out)", "native", "vendor", "native/vendor"], rows)


def attention_keys(cases, pattern=ATTN):
    """{key: {kind: fwd+bwd ms}} of the attention cases with both directions."""
    parts = {}
    for name, b in cases.items():
        m = pattern.match(name)
        if m:
            parts.setdefault(m.group(3), {}).setdefault(m.group(2), {})["bwd" if m.group(1) else "fwd"] = ms(b)
    return {k: {impl: d["fwd"] + d["bwd"] for impl, d in v.items() if len(d) == 2} for k, v in parts.items()}


def seq_len(key):
    m = re.search(r"T(\d+)", key)
    return int(m.group(1)) if m else 0


def attention_rows(s, cases, why, sdpa, sdpa_why, kb=None):
    keys = attention_keys(cases)
    T = max((seq_len(k) for k in keys), default=0)
    at_T = {k: v for k, v in keys.items() if seq_len(k) == T}
    text = f"fused attention >= {ATTN_NAIVE_MIN:g}x naive, fwd+bwd, T={T or 2048}"
    speedups = [(v["naive"] / v["fused"], k) for k, v in at_T.items() if "naive" in v and "fused" in v]
    if speedups:
        r, k = min(speedups)
        s.target("attention-naive", text, f"{r:.2f}x (worst of {len(speedups)}: {k})", verdict(r >= ATTN_NAIVE_MIN), value=r)
    else:
        s.target("attention-naive", text, why or f"no naive and fused attention cases at T{T or 2048}", "n/a")
    def cell(v, impl):
        return f"{v[impl]:.3f}" if impl in v else "-"
    # fused's CUDA-core shape, a column only where the run has it (fp32 fused on the tensor cores)
    cores = ["fused_cuda_cores"] if any("fused_cuda_cores" in v for v in keys.values()) else []
    s.table("Attention, fwd+bwd ms (kformer-kernel-bench)", ["case", "naive", "fused", *cores, "batched_gemm", "naive/fused"],
            [[k, cell(v, "naive"), cell(v, "fused"), *[cell(v, c) for c in cores], cell(v, "batched_gemm"),
              f"{v['naive'] / v['fused']:.2f}" if "naive" in v and "fused" in v else "-"]
             for k, v in sorted(keys.items(), key=lambda kv: (seq_len(kv[0]), kv[0]))])

    bf16 = attention_keys(cases, ATTN_BF16)
    if bf16:
        s.table("Attention in bf16, fwd+bwd ms (kformer-kernel-bench attention_bf16: 8192 tokens on a GPU, "
                "12 heads of 64, or 6 of 128 where the case says hd128)", ["case", *ATTN_KINDS],
                [[k, *(cell(v, kind) for kind in ATTN_KINDS)]
                 for k, v in sorted(bf16.items(), key=lambda kv: (seq_len(kv[0]), kv[0]))])

    rows = (sdpa or {}).get("rows", [])
    fp32 = [r for r in rows if r["dtype"] == "fp32" and r.get("fused_over_sdpa")]
    T_sdpa = (sdpa or {}).get("T", T or 2048)
    text = f"fused attention within {ATTN_SDPA_MAX:g}x of PyTorch SDPA's time, fp32 fwd+bwd, T={T_sdpa}"
    if fp32:
        r, k = max((x["fused_over_sdpa"], x["case"]) for x in fp32)
        impl = sdpa.get("attention", "")
        if impl == "sdpa":
            s.target("attention-sdpa", text, f"{r:.2f}x SDPA's time (worst of {len(fp32)}: {k})", verdict(r <= ATTN_SDPA_MAX), value=r)
        else:
            s.target("attention-sdpa", text, f"{r:.2f}x, but against {impl}", "n/a", value=r)
    else:
        s.target("attention-sdpa", text, sdpa_why or "no fp32 row in sdpa.json", "n/a")
    # For information: the batched-GEMM attention against the same yardstick.
    text = f"batched_gemm attention against PyTorch SDPA's time, fp32 fwd+bwd, T={T_sdpa}"
    batched = [r for r in fp32 if r.get("batched_gemm_over_sdpa")]
    if batched:
        r, k = max((x["batched_gemm_over_sdpa"], x["case"]) for x in batched)
        impl = sdpa.get("attention", "")
        against = f"{r:.2f}x SDPA's time (worst of {len(batched)}: {k})" if impl == "sdpa" else f"{r:.2f}x, but against {impl}"
        s.target("attention-batched-sdpa", text, against, "info", value=r)
    else:
        s.target("attention-batched-sdpa", text, sdpa_why or "no batched_gemm case (a build without a vendor BLAS)", "n/a")
    s.table("Attention against PyTorch (ms)", ["case", "B,H,KV,T,hd", "dtype", "sdpa fwd", "sdpa fwd+bwd",
                                               "kformer fused fwd+bwd", "fused/sdpa"],
            [[r["case"], shape_text(r), r["dtype"],
              f"{r['sdpa_fwd_ms']:.3f}", f"{r['sdpa_fwd_bwd_ms']:.3f}", f"{r['kformer_fused_fwd_bwd_ms']:.3f}",
              f"{r['fused_over_sdpa']:.2f}" if r.get("fused_over_sdpa") else "-"] for r in rows])
    vendor_rows(s, cases, why, sdpa, sdpa_why, kb)


def shape_text(row):
    return ",".join(str(row["shape"][x]) for x in ("B", "H", "KV", "T", "hd"))


def vendor_speeds(sdpa):
    """{case: SDPA's fwd+bwd time over vendor's} from sdpa.json's bf16 rows (attention_vs_sdpa.py
    keeps kformer's time over SDPA's, vendor_over_sdpa: inverted here, the target being a speed)."""
    return {r["case"]: 1.0 / r["vendor_over_sdpa"] for r in (sdpa or {}).get("bf16_rows", []) if r.get("vendor_over_sdpa")}


def vendor_rows(s, cases, why, sdpa, sdpa_why, kb):
    """Issue 35's target, vendor against SDPA in bf16, and the bf16 cases beside SDPA's."""
    text = (f"vendor attention fwd+bwd >= {VENDOR_SDPA_MIN:g} of SDPA (bf16, T 1024/2048, hd 64/128; "
            f"SDPA's time over vendor's)")
    names = [b["name"].split("/min_time")[0] for b in (kb or {}).get("benchmarks", [])]
    vendor = [n for n in names if ATTN_BF16.match(n) and ATTN_BF16.match(n).group(2) == "vendor"]
    failed = [b for b in (kb or {}).get("benchmarks", []) if b.get("error_occurred")
              and b["name"].split("/min_time")[0] in vendor]
    speeds = vendor_speeds(sdpa)
    impl = (sdpa or {}).get("attention", "")
    if not cases and why:
        s.target("attention-vendor-sdpa", text, why, "n/a")
    elif not vendor:
        s.target("attention-vendor-sdpa", text, "not built: kernel_bench.json has no attention_bf16/vendor case "
                 "(kernels.attention=vendor needs a CUDA build with cuDNN)", "n/a")
    elif not speeds:
        err = f"; {len(failed)} vendor case(s) failed: {failed[0].get('error_message', '?')}" if failed else ""
        s.target("attention-vendor-sdpa", text, (sdpa_why or "no vendor figure in sdpa.json's bf16_rows") + err, "n/a")
    else:
        worst, case = min((v, k) for k, v in speeds.items())
        missing = [k for k in VENDOR_SHAPES if k not in speeds]
        measured = f"{worst:.2f} of SDPA (worst of {len(speeds)}: {case})"
        measured += f"; not measured: {', '.join(missing)}" if missing else ""
        if impl != "sdpa":
            s.target("attention-vendor-sdpa", text, f"{measured}, but against {impl}", "n/a", value=worst)
        else:
            ok = worst >= VENDOR_SDPA_MIN
            s.target("attention-vendor-sdpa", text, measured, "FAIL" if not ok else "n/a" if missing else "PASS",
                     value=worst)

    def cell(row, kind):
        t = row.get(f"kformer_{kind}_fwd_bwd_ms")
        return "-" if t is None else f"{t:.3f} ({row[f'{kind}_over_sdpa']:.2f})"
    s.table("Attention in bf16 against PyTorch SDPA in bf16 (fwd+bwd ms; in brackets kformer's time over SDPA's; "
            "vendor/SDPA speed: SDPA's time over vendor's, issue 35's figure)",
            ["case", "B,H,KV,T,hd", "sdpa fwd+bwd", *ATTN_KINDS, "vendor/SDPA speed"],
            [[r["case"], shape_text(r), f"{r['sdpa_fwd_bwd_ms']:.3f}", *(cell(r, k) for k in ATTN_KINDS),
              f"{speeds[r['case']]:.2f}" if r["case"] in speeds else "-"]
             for r in (sdpa or {}).get("bf16_rows", [])])


def memory_rows(s, cases, why):
    """Every case judged against the copy (it carries copy_gbps)."""
    mem = {n: b for n, b in cases.items() if "copy_gbps" in b and b.get("vs_ceiling") is not None}
    rows = [[n, f"{b.get('gbps', 0):.1f}", f"{b['copy_gbps']:.1f}", f"{b['vs_ceiling']:.3f}",
             f"{b['copy_same_gbps']:.1f}" if "copy_same_gbps" in b else "-",
             f"{b['vs_same_size']:.3f}" if "vs_same_size" in b else "-"] for n, b in sorted(mem.items())]
    for tid, label, pick in (("memory-fp32", "fp32", lambda n: "_bf16/" not in n), ("memory-bf16", "bf16", lambda n: "_bf16/" in n)):
        sel = [(b["vs_ceiling"], n) for n, b in mem.items() if pick(n) and not n.startswith("probe_")]
        text = f"memory-bound kernels ({label}) >= {MEM_MIN} of the copy bandwidth, every case"
        if sel:
            r, n = min(sel)
            ok = sum(1 for v, _ in sel if v >= MEM_MIN)
            s.target(tid, text, f"{r:.3f} worst ({n}); {ok} of {len(sel)} at or above", verdict(ok == len(sel)), value=r)
        else:
            s.target(tid, text, why or f"no {label} memory-bound cases", "n/a")
    s.table("Memory-bound kernels (GB/s; ratio = vs_ceiling, the median over blocks of the case's rate over its copy's, "
            "the target's; same size: a copy moving the case's bytes per call by the same means, what the case's size "
            "allows with its launch and the caches, and the case's rate over it)",
            ["case", "GB/s", "copy GB/s", "ratio", "same-size copy GB/s", "over the same-size copy"], rows)


def kformer_kernels(st):
    """(attention, GEMM) kformer ran in a step_*.json, as "vendor (auto)" where a setting chose it at
    start-up, the kind alone where the setting named it, "a/b (auto)" where the rounds' processes
    chose differently. From the report's summary.kernels_attention and kernels_gemm (kept by
    bench/step_vs_torch_gpu.py); a JSON from before them gives the setting (its GEMM: vendor, which
    the script then pinned)."""
    k = (st or {}).get("kformer", {})
    rounds = k.get("kinds_rounds", [])

    def one(chosen, setting, field):
        kinds = sorted({r[field] for r in rounds if r.get(field)})
        if len(kinds) > 1:
            chosen = "/".join(kinds)
        if not chosen:
            return "auto (kind not recorded)" if setting == "auto" else setting
        return chosen if chosen == setting else f"{chosen} ({setting})"
    ka, kg = k.get("kernels_attention") or {}, k.get("kernels_gemm") or {}
    return (one(ka.get("kind"), ka.get("setting") or (st or {}).get("kformer_attention", "?"), "attention"),
            one(kg.get("impl"), kg.get("setting") or (st or {}).get("kformer_gemm", "vendor"), "gemm"))


FAMILY_HEADER = ["precision", "family", "kformer ms", "of kformer's step", "eager ms", "of eager's kernels",
                 "kformer / eager"]  # family_rows' columns


def step_rows(s, steps):
    table, choices, times = [], [], []
    for p in ("fp32", "bf16"):
        st, why = steps[p]
        k = (st or {}).get("kformer", {})
        attn, gemm = kformer_kernels(st)
        ran = f"; kformer: attention {attn}, GEMM {gemm}"
        text = f"kformer step no slower than PyTorch eager ({p})"
        e = (st or {}).get("eager", {})
        if e.get("torch_over_kformer"):
            r = e["torch_over_kformer"]
            s.target(f"step-eager-{p}", text, f"torch/kformer {r:.3f} ({e['step_ms']:.1f} / {k['step_ms']:.1f} ms{ran})",
                     verdict(r >= STEP_MIN), value=r)
        else:
            s.target(f"step-eager-{p}", text, why or "no eager figure", "n/a")
        c = (st or {}).get("compile", {})
        text = f"kformer step against torch.compile ({p})"
        if c.get("torch_over_kformer"):
            r = c["torch_over_kformer"]
            s.target(f"step-compile-{p}", text, f"torch/kformer {r:.3f} ({c['step_ms']:.1f} / {k['step_ms']:.1f} ms{ran})",
                     "info", value=r)
        else:
            s.target(f"step-compile-{p}", text, why or f"not timed: {c.get('error', 'no figure')}", "info")
        text = f"MFU ({p}): kformer's model FLOP/s over its start-up GEMM ceiling (summary.gemm_ceiling_tflops)"
        if k.get("mfu") is not None:
            g = k["gemm_ceiling"]
            extra = ""
            if p == "bf16" and k.get("mfu_vs_torch_bf16_matmul") is not None:
                extra = f"; {k['mfu_vs_torch_bf16_matmul']:.3f} of torch's bf16 matmul ({st['torch_matmul_tflops']['bf16']:.3g} TFLOP/s)"
            figure, value = f"{k['mfu']:.3f} ({k['tflops']:.3g} of {k['gemm_ceiling_tflops']:.3g} TFLOP/s", k["mfu"]
            if report_mfu_only(st):
                figure = f"{k['mfu_report']:.3f} in kformer's report (model FLOPs); {figure} over the kernels' causal count"
                value = k["mfu_report"]
            s.target(f"mfu-{p}", text, f"{figure}, {g['impl']} {g.get('precision', p)} GEMM {g['shape']}){extra}", "info",
                     value=value)
        else:
            s.target(f"mfu-{p}", text, why or "no kformer figure", "n/a")
        for name in ("kformer", "eager", "compile"):
            v = (st or {}).get(name, {})
            if v.get("step_ms"):
                table.append([p, name, attn if name == "kformer" else (st or {}).get("attention", "?"),
                              gemm if name == "kformer" else "torch", f"{v['step_ms']:.2f}", f"{v.get('tflops', 0):.3g}",
                              f"{v['torch_over_kformer']:.3f}" if v.get("torch_over_kformer") else "-",
                              f"{v['loss1']:.5f}" if v.get("loss1") is not None else "-",
                              str(len(v.get("step_ms_rounds", [])))])
        times += family_rows(p, k.get("kernel_times"), ((st or {}).get("eager") or {}).get("kernel_families"))
        for what, field in (("attention", "kernels_attention"), ("GEMM", "kernels_gemm")):
            d = k.get(field)
            if d:
                why = str(d.get("reason", "?"))
                if d.get("differences"):  # since session 55: each candidate's results against the nearest other's
                    why += "; relative difference of the results from the nearest other kind's: " + ", ".join(
                        f"{kind} {'not finite' if v is None else f'{v:.2g}'}" for kind, v in d["differences"].items())
                choices.append([p, what, d.get("kind") or d.get("impl") or "?", str(d.get("setting", "?")), why])
    first = next((st for st, _ in steps.values() if st), {})
    s.table(f"Training step ({first.get('shape', '?')} shape, init: {first.get('init', '?')})",
            ["precision", "variant", "attention", "GEMM", "step ms", "TFLOP/s", "torch/kformer", "loss 1", "rounds"], table)
    s.table("kformer's kernel choices in the step (its report's summary.kernels_attention and kernels_gemm, first round)",
            ["precision", "kernel", "ran", "setting", "why"], choices)
    s.table("kformer's step by kernel family, measured (one more run with output.kernel_times: each call fenced, "
            "ms of that run's steps after its first; predict.breakdown prints the same families), beside PyTorch "
            "eager's (three steps under torch.profiler, bench/torch_families.py: on a GPU its kernels' device time, "
            "on the CPU its operators' own time, ms a step)",
            FAMILY_HEADER, times)


def family_rows(p, kt, tf):
    """Rows of the family table for one precision: kformer's kernel times (kt) and eager's profile (tf)."""
    tf = tf if (tf or {}).get("by_family_ms") else None  # a profile that failed says why in the step JSON
    kf = (kt or {}).get("by_family_ms", {})
    ef = (tf or {}).get("by_family_ms", {})
    if not kf and not ef:
        return []
    kstep, etotal = (kt or {}).get("step_ms") or 0, (tf or {}).get("total_ms") or 0
    rows = []

    def cell(ms, whole):
        return (f"{ms:.3f}", f"{100 * ms / whole:.1f}%" if whole else "-") if ms is not None else ("-", "-")

    for family in sorted(set(kf) | set(ef), key=lambda f: -max(kf.get(f, 0), ef.get(f, 0))):
        km = kf.get(family, 0.0) if kt else None  # None: that side was not measured
        em = ef.get(family, 0.0) if tf else None
        ratio = f"{km / em:.2f}" if km and em else "-"
        rows.append([p, family, *cell(km, kstep), *cell(em, etotal), ratio])
    if kt:
        rows.append([p, "outside the calls", *cell(kt.get("outside_calls_ms", 0), kstep), "-", "-", "-"])
    return rows


def markdown(s, title, notes, details=True):
    lines = [f"# {title}", "", *notes, "", "| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t['target']} | {t['measured']} | {t['verdict']} |" for t in s.targets]
    for name, header, rows in s.details if details else []:
        lines += ["", f"## {name}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows] or ["| " + " | ".join(["(none)"] + [""] * (len(header) - 1)) + " |"]
    return "\n".join(lines) + "\n"


def step_log(path):
    """gpu_perf.sh's steps that did not pass: [name, kind, rc, seconds, note]."""
    if not path:
        return []
    with open(path) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return [r for r in rows if len(r) == 5 and r[2] != "0"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--merge-bench", nargs="+", metavar="PART",
                    help="only merge these kformer-kernel-bench reports (cut-short ones too) into DIR/kernel_bench.json")
    ap.add_argument("--steps", help="gpu_perf.sh's step log (TSV)")
    ap.add_argument("--error", help="why nothing could run")
    ap.add_argument("--md", help="write the markdown with the per-case tables here")
    ap.add_argument("--json", help="write the targets as JSON here")
    ap.add_argument("--remaining", nargs=2, metavar=("PART", "LISTING"),
                    help="a crashed kernel-bench report and its --benchmark_list_tests: the case it crashed in, and a filter of those after it")
    a = ap.parse_args()
    if a.remaining:
        remaining(*a.remaining)
        return 0
    if a.merge_bench:
        merge_bench(a.merge_bench, os.path.join(a.dir, "kernel_bench.json"))
        return 0
    kb, kb_why = load(a.dir, "kernel_bench.json")
    sdpa, sdpa_why = load(a.dir, "sdpa.json")
    steps = {p: load(a.dir, f"step_{p}.json") for p in ("fp32", "bf16")}
    cases = bench_cases(kb)
    s = Summary()
    gemm_rows(s, cases, kb_why)
    attention_rows(s, cases, kb_why, sdpa, sdpa_why, kb)
    memory_rows(s, cases, kb_why)
    step_rows(s, steps)

    ctx = (kb or {}).get("context", {})
    gpu = next((x.get("gpu") for x in [sdpa, *(st for st, _ in steps.values())] if x and x.get("gpu")), None)
    where = gpu or f"{ctx.get('kokkos_execution_space', 'unknown backend')} on {ctx.get('host_name', 'unknown host')}"
    notes = [f"Device: {where}; kformer {ctx.get('kformer_git', '?')}, Kokkos {ctx.get('kokkos_execution_space', '?')}, "
             f"vendor BLAS: {ctx.get('blas', '?')}; torch {next((x['torch'] for x in [sdpa, *(st for st, _ in steps.values())] if x), '?')}."]
    if a.error:
        notes.append(f"Nothing ran: {a.error}")
    notes += [f"Step `{r[0]}` did not pass (exit {r[2]} after {r[3]} s{', timed out' if r[2] in ('124', '137') else ''}"
              f"; {r[4]}): its rows may say n/a." for r in step_log(a.steps)]
    title = "kformer against its issue-19 and issue-35 targets"
    sys.stdout.write(markdown(s, title, notes, details=False))
    if a.md:
        with open(a.md, "w") as f:
            f.write(markdown(s, title, notes))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": where, "targets": s.targets}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
