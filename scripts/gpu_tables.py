#!/usr/bin/python3
"""docs/PERFORMANCE.md's GPU tables, generated from the runs kept under docs/gpu-runs/ (each the raw
outputs of scripts/gpu_session.sh, kept by scripts/gpu_keep.sh), so that every figure in them can be
traced to a file and its sha256.

    scripts/gpu_tables.py [--check] [--runs docs/gpu-runs] [--doc docs/PERFORMANCE.md]

Writes the tables between the doc's `<!-- gpu-tables:begin -->` and `<!-- gpu-tables:end -->`;
--check writes nothing and exits 1 with a diff when the doc's tables differ from what the files
give (ctest gpu_tables_docs). Exit 2: no markers, or a kept run that does not match its manifest.
Per run: gpu_check.sh's verdicts, issues 19's and 35's targets (scripts/gpu_perf_summary.py on
perf/), the 124M step against PyTorch eager and torch.compile with MFU and the attention and GEMM
kformer ran, attention against SDPA (fp32; bf16 with every kind, vendor = cuDNN included, at head
sizes 64 and 128), native GEMM against cuBLAS, the memory-bound kernels against the copy, the
calibrated profile, PyTorch SDPA's FlashAttention-2 and cuDNN kernels at the published rows' shapes
where the run timed them (bench/flash2_rate.py), and compute beside a held SM share where the run
measured it (kformer-sm-share, bench/contention).
"""
import argparse
import json
import os
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_manifest  # noqa: E402
import marked_section  # noqa: E402
import gpu_perf_summary as summary  # noqa: E402  (the JSONs' parsing and the targets)

BEGIN, END = "<!-- gpu-tables:begin -->", "<!-- gpu-tables:end -->"
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def ratio(a, b):
    return a / b if a and b else None


def table(title, header, rows, empty):
    """A bold title, then the markdown table, or the reason it has no rows."""
    out = ["", f"**{title}**", ""]
    if not rows:
        return out + [f"({empty})"]
    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]


def check_part(run):
    g, why = summary.load(os.path.join(run, "check"), "gpu_check.json")
    if not g:
        return ["", f"Correctness: {why}."]
    steps = g.get("steps", [])
    tests = [s for s in steps if s.get("kind") == "gtest"]
    line = (f"Correctness (`check/gpu_check.json`): {len(g.get('passed', []))} of {len(steps)} steps passed"
            f"{'; failed: ' + ', '.join(g['failed']) if g.get('failed') else ''}; CUDA test binaries: {len(tests)}, "
            f"{sum(s.get('tests') or 0 for s in tests)} tests, {sum(s.get('failures') or 0 for s in tests)} failures"
            f"{'; ' + g['error'] if g.get('error') else ''}.")
    rows = []
    for s in steps:
        if s.get("kind") in ("compare", "kformer", "gpu"):
            sm = s.get("summary") or {}
            ms = sm.get("step_ms_median")
            kinds = (sm.get("attention"), sm.get("gemm"))
            if s.get("kind") == "kformer" and not any(kinds):  # a run before session 50: from its kept report
                try:
                    rs = json.load(open(os.path.join(run, "check", s["name"] + ".json"))).get("summary", {})
                    kinds = ((rs.get("kernels_attention") or {}).get("kind"), (rs.get("kernels_gemm") or {}).get("impl"))
                except (OSError, ValueError):
                    pass
            ran = f"; ran attention {kinds[0]}, GEMM {kinds[1]}" if all(kinds) else ""
            rows.append([s["name"], "passed" if s["rc"] == 0 else f"FAILED (exit {s['rc']})",
                         s.get("note", "") + ran + (f"; step {ms:.1f} ms" if ms else "")])
    return ["", line] + table("gpu_check.sh's runs", ["step", "verdict", "what"], rows, "no run")


def step_part(steps):
    rows, notes = [], []
    for p in ("fp32", "bf16"):
        st, why = steps[p]
        if not st:
            notes.append(f"{p}: {why}")
            continue
        k, e, c = st.get("kformer", {}), st.get("eager", {}), st.get("compile", {})
        flops, ceiling = st.get("flops_per_step"), k.get("gemm_ceiling_tflops")
        tflops = flops / (k["step_ms"] / 1e3) / 1e12 if flops and k.get("step_ms") else None
        if summary.report_mfu_only(st) and ceiling:
            tflops = k["mfu_report"] * ceiling
        rows.append([p, *summary.kformer_kernels(st), fmt(k.get("step_ms"), ".2f"), fmt(e.get("step_ms"), ".2f"),
                     fmt(ratio(e.get("step_ms"), k.get("step_ms")), ".3f"), fmt(c.get("step_ms"), ".2f"),
                     fmt(ratio(c.get("step_ms"), k.get("step_ms")), ".3f"), fmt(tflops, ".3g"), fmt(ceiling, ".3g"),
                     fmt(ratio(tflops, ceiling), ".3f"), str(st.get("rounds", 0))])
        g = k.get("gemm_ceiling") or {}
        about = (f"{st.get('shape', '?')} shape, weights from {st.get('init', '?')}, PyTorch attention {st.get('attention', '?')}, "
                 f"torch {st.get('torch', '?')}, {p} GEMM ceiling: {g.get('impl', '?')} {g.get('precision', p)} GEMM {g.get('shape', '?')}")
        if about not in notes:  # both precisions' are usually the same
            notes.append(about)
        if c.get("error"):
            notes.append(f"{p}: torch.compile: {c['error']}")
        if st.get("stopped"):
            notes.append(f"{p}: {st['stopped']}")
    header = ["precision", "kformer attention", "kformer GEMM", "kformer ms", "eager ms", "eager/kformer", "compile ms",
              "compile/kformer", "kformer TFLOP/s", "GEMM ceiling TFLOP/s", "MFU", "rounds"]
    out = table("The training step against PyTorch eager and torch.compile (`perf/step_*.json`; ms, median over rounds; "
                "ratio > 1: kformer faster; MFU = kformer's model TFLOP/s, docs/figures.md's convention, over its GEMM ceiling)", header, rows, "no step figures")
    return out + ["", "; ".join(notes) + "."]


def family_part(steps):
    """Each step by kernel family, kformer's measured (kformer.kernel_times) beside eager's
    (eager.kernel_families), where the step JSONs have them (runs kept before session 52's or 53's
    additions have neither: no table, and their section reads as it did)."""
    rows = []
    for p in ("fp32", "bf16"):
        st = steps[p][0] or {}
        rows += summary.family_rows(p, st.get("kformer", {}).get("kernel_times"),
                                    st.get("eager", {}).get("kernel_families"))
    if not rows:
        return []
    return table("The step by kernel family (`perf/step_*.json`: kformer's kernel_times, each call fenced; eager's "
                 "kernel_families, three steps under torch.profiler; ms a step)",
                 summary.FAMILY_HEADER, rows, "")


def attention_part(cases, sdpa):
    by_key = {(r["case"], r["dtype"]): r for r in (sdpa or {}).get("rows", [])}
    rows = []
    keys = summary.attention_keys(cases)
    for key, v in sorted(keys.items(), key=lambda kv: (summary.seq_len(kv[0]), kv[0])):
        f32, b16 = by_key.get((key, "fp32"), {}), by_key.get((key, "bf16"), {})
        shape = ",".join(str(f32["shape"][x]) for x in ("B", "H", "KV", "T", "hd")) if f32 else "-"
        sd = f32.get("sdpa_fwd_bwd_ms")
        rows.append([key, shape, fmt(v.get("naive"), ".3f"), fmt(v.get("fused"), ".3f"), fmt(v.get("batched_gemm"), ".3f"),
                     fmt(sd, ".3f"), fmt(b16.get("sdpa_fwd_bwd_ms"), ".3f"), fmt(ratio(v.get("fused"), sd), ".2f"),
                     fmt(ratio(v.get("batched_gemm"), sd), ".2f")])
    out = table("Attention forward + backward, fp32 (`perf/kernel_bench.json`, `perf/sdpa.json`; ms; "
                "x/SDPA: kformer's time over SDPA's in fp32)",
                ["case", "B,H,KV,T,hd", "naive", "fused", "batched_gemm", "SDPA fp32", "SDPA bf16", "fused/SDPA",
                 "batched_gemm/SDPA"], rows, "no attention cases")
    bf16 = summary.attention_keys(cases, summary.ATTN_BF16)
    rows16 = {r["case"]: r for r in (sdpa or {}).get("bf16_rows", [])}
    speeds = summary.vendor_speeds(sdpa)
    if bf16 or rows16:
        out += table("Attention forward + backward, bf16 (`perf/kernel_bench.json` attention_bf16, `perf/sdpa.json` "
                     "bf16_rows; ms; hd128: 6 heads of 128, else 12 of 64; vendor/SDPA speed: SDPA's time over "
                     "vendor's, issue 35's target 0.8)",
                     ["case", "B,H,KV,T,hd", *summary.ATTN_KINDS, "SDPA bf16", "vendor/SDPA speed"],
                     [[k, summary.shape_text(rows16[k]) if k in rows16 else "-",
                       *(fmt(bf16.get(k, {}).get(kind), ".3f") for kind in summary.ATTN_KINDS),
                       fmt(rows16.get(k, {}).get("sdpa_fwd_bwd_ms"), ".3f"), fmt(speeds.get(k), ".2f")]
                      for k in sorted(set(bf16) | set(rows16), key=lambda x: (summary.seq_len(x), x))], "")
    return out


def memory_part(cases):
    """fp32 and bf16 cases side by side (bench_pointwise_bf16.cpp names <kernel>_bf16/...)."""
    pairs = {}
    for name, b in cases.items():
        if "copy_gbps" in b and b.get("vs_ceiling") is not None:
            bf16 = "_bf16/" in name
            pairs.setdefault(name.replace("_bf16/", "/", 1), {})["bf16" if bf16 else "fp32"] = b
    rows = []
    # since session 53 each case also has a copy of its own bytes beside it (vs_same_size): two more
    # columns where the run has them
    same = any("vs_same_size" in b for v in pairs.values() for b in v.values())
    for name, v in sorted(pairs.items()):
        f, h = v.get("fp32", {}), v.get("bf16", {})
        rows.append([name, fmt(f.get("gbps"), ".0f"), fmt(f.get("vs_ceiling"), ".3f"), fmt(h.get("gbps"), ".0f"),
                     fmt(h.get("vs_ceiling"), ".3f"), fmt((f or h).get("copy_gbps"), ".0f")]
                    + ([fmt(f.get("vs_same_size"), ".3f"), fmt(h.get("vs_same_size"), ".3f")] if same else []))
    return table("Memory-bound kernels against the copy timed beside each (`perf/kernel_bench.json`; of copy: "
                 "vs_ceiling, the median over blocks of the case's rate over the copy's"
                 + ("; of same size: vs_same_size, over a copy moving the case's bytes per call" if same else "") + ")",
                 ["case", "fp32 GB/s", "fp32 of copy", "bf16 GB/s", "bf16 of copy", "copy GB/s"]
                 + (["fp32 of same size", "bf16 of same size"] if same else []), rows,
                 "no memory-bound cases")


def profile_part(run):
    rows, d = [], os.path.join(run, "calibrate")
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not name.endswith(".yaml"):
            continue
        try:
            with open(os.path.join(d, name)) as f:
                p = yaml.safe_load(f) or {}
        except yaml.YAMLError as e:
            rows.append([f"calibrate/{name}", f"unreadable: {str(e).splitlines()[0]}"] + ["-"] * 6)
            continue
        g, b = p.get("gemm") or {}, (p.get("bf16") or {}).get("gemm") or {}

        def best(x):
            return x["peak_tflops"] * x["max_efficiency"] if "peak_tflops" in x and "max_efficiency" in x else None
        rows.append([f"calibrate/{name}", fmt(p.get("memory_gb"), ".1f"), fmt(p.get("fma_peak_tflops"), ".1f"),
                     fmt(best(g), ".1f"), fmt(best(b), ".0f"), fmt(p.get("copy_gbps"), ".0f"), fmt(p.get("launch_us"), ".1f"),
                     fmt(p.get("compute_scale"), ".3f")])
    return table("Calibrated profile (`kformer calibrate`; GEMM: peak_tflops x max_efficiency)",
                 ["profile", "memory GB", "FMA peak TFLOP/s", "GEMM fp32 TFLOP/s", "GEMM bf16 TFLOP/s", "copy GB/s",
                  "launch us", "compute_scale"], rows, "no profile: calibrate did not run")


def flash_part(run):
    """bench/flash2_rate.py's rates (gpu_session.sh's seventh budget), where the run has them."""
    f, why = summary.load(os.path.join(run, "flash"), "flash2_rate.json")
    if not f:
        return [] if why == "no flash2_rate.json" else ["", f"SDPA's kernels: {why}."]
    rows = [[name, f"{r['B']}x{r['T']}x{r['H']}x{r['hd']}", fmt(r.get("forward_ms"), ".3f"), fmt(r.get("forward_tflops"), ".0f"),
             fmt(r.get("backward_ms"), ".3f"), fmt(r.get("backward_tflops"), ".0f"), fmt(r.get("fwd_bwd_tflops"), ".0f")]
            for name, rs in f.get("backends", {}).items() for r in rs]
    out = table(f"PyTorch SDPA's kernels at the published rows' attention shapes (`flash/flash2_rate.json`, torch "
                f"{f.get('torch', '?')}, {f.get('dtype', '?')}, causal but for batched; FLOPs as predict counts them, "
                f"batched's over every score)",
                ["backend", "BxTxHxhd", "forward ms", "TFLOP/s", "backward ms", "TFLOP/s", "together TFLOP/s"], rows,
                "no backend ran")
    skipped = "; ".join(f"{k}: {v}" for k, v in f.get("skipped", {}).items())
    def by_length(backend, *keys):  # a backend's timed rates by sequence length, as the profiles take them
        rows = sorted((r for r in f.get("backends", {}).get(backend, []) if r.get(keys[0]) is not None),
                      key=lambda r: r["T"])
        return ", ".join(f"T {r['T']}: " + " and ".join(fmt(r.get(k), ".0f") for k in keys) for r in rows)
    out += ["", f"FlashAttention-2's forward and backward together here, for a profile's `bf16.attention.flash2_tflops` "
                f"by sequence length: {by_length('flash', 'fwd_bwd_tflops') or 'none timed'} TFLOP/s (lowest "
                f"{fmt(f.get('flash2_tflops'), '.0f')}; the profiles take its authors' charts: 173 and 182 at T 4096 "
                f"and 8192 on an A100, 294 and 308 on an H100){'; not timed: ' + skipped if skipped else ''}."]
    batched = f.get("batched_gemm_tflops") or {}
    if batched:
        here = "; ".join(f"heads of {hd}: " + ", ".join(f"T {t}: {fmt(r, '.0f')}" for t, r in sorted(by_t.items(), key=lambda x: int(x[0])))
                         for hd, by_t in sorted(batched.items(), key=lambda x: int(x[0])))
        out += ["", f"Megatron-LM's attention kernels (baddbmm, softmax, bmm; not causal) here, forward and backward "
                    f"together, for a profile's `bf16.attention.batched_gemm_tflops`: {here} TFLOP/s (the profiles take "
                    f"FlashAttention-2's charts' PyTorch bars: at T 2048, 43 and 76 with heads of 64 and 128 on an "
                    f"A100 80GB, 81 and 145 on an H100)."]
    cudnn = by_length("cudnn", "forward_tflops", "backward_tflops")
    if cudnn:
        out += ["", f"cuDNN's rates here, forward and backward, for a profile's `bf16.attention.cudnn_forward_tflops` "
                    f"and `cudnn_backward_tflops` by sequence length: {cudnn} TFLOP/s (the H100 profiles take "
                    f"FlashAttention-3's charts: 518 and 499 at T 4096)."]
    return out


def contention_part(run):
    """kformer-sm-share's cases (gpu_session.sh's eighth budget), where the run has them."""
    f, why = summary.load(os.path.join(run, "contend"), "sm_share.json")
    if not f:
        return [] if why == "no sm_share.json" else ["", f"Compute beside a held SM share: {why}."]
    rows = [[c["kernel"], "x".join(str(x) for x in c["shape"]), str(c["held_sms"]), fmt(c.get("traffic_target_gbps"), ".0f"),
             fmt(c.get("traffic_gbps"), ".0f"), fmt(c.get("alone_us"), ".1f"), fmt(c.get("beside_us"), ".1f"),
             fmt(c.get("ratio"), ".3f"), fmt(c.get("sm_share_ratio"), ".3f")] for c in f.get("cases", [])]
    return table(f"Compute beside a kernel holding SMs as an NCCL collective does (`contend/sm_share.json`, "
                 f"{f.get('device', '?')}, {f.get('sms', '?')} SMs; predict charges the SM share's ratio)",
                 ["kernel", "shape", "held SMs", "HBM traffic target GB/s", "measured GB/s", "alone us", "beside us",
                  "ratio", "SM share's ratio"], rows, "no case ran")


def run_part(root, name, doc_dir):
    run = os.path.join(root, name)
    m = gpu_manifest.check(run)
    perf = os.path.join(run, "perf")
    kb, kb_why = summary.load(perf, "kernel_bench.json")
    sdpa, sdpa_why = summary.load(perf, "sdpa.json")
    steps = {p: summary.load(perf, f"step_{p}.json") for p in ("fp32", "bf16")}
    cases = summary.bench_cases(kb)
    s = summary.Summary()
    summary.gemm_rows(s, cases, kb_why)
    summary.attention_rows(s, cases, kb_why, sdpa, sdpa_why, kb)
    summary.memory_rows(s, cases, kb_why)
    summary.step_rows(s, steps)

    link = os.path.relpath(os.path.join(run, gpu_manifest.MANIFEST), doc_dir)
    exits = ", ".join(f"{k} {v}" for k, v in m.get("exit", {}).items())
    left = "; left out: " + ", ".join(f"{e['path']} ({e['why']})" for e in m["left_out"]) if m.get("left_out") else ""
    out = [f"#### {name}: {m['gpu']}, `{m['command']}`", "",
           f"{m['date']} ({m.get('started')} to {m.get('finished')}), {m.get('gpu_count')} GPU(s), driver {m.get('driver')}, "
           f"bundle {m.get('bundle_git')} ({m.get('bundle_arch')}), kernel bench of kformer "
           f"{(kb or {}).get('context', {}).get('kformer_git', '?')}; exit statuses: {exits}; {len(m['files'])} files "
           f"listed with their sha256 in [manifest.json]({link}){left}."]
    out += check_part(run)
    out += table("Issues 19's and 35's targets (`scripts/gpu_perf_summary.py` on `perf/`)", ["target", "measured", "verdict"],
                 [[t["target"], t["measured"], t["verdict"]] for t in s.targets], "")
    out += step_part(steps)
    out += family_part(steps)
    out += attention_part(cases, sdpa)
    for title, header, rows in s.details:
        if title.startswith("GEMM"):
            out += table(f"{title} (`perf/kernel_bench.json`)", header, rows, kb_why or "no GEMM cases")
    out += memory_part(cases)
    out += profile_part(run)
    out += flash_part(run)
    out += contention_part(run)
    return out


def generate(root, doc):
    names = sorted(n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n))) if os.path.isdir(root) else []
    if not names:
        return "No GPU run is kept yet: `scripts/gpu_keep.sh` keeps one under docs/gpu-runs/ (gpu-path.md).\n"
    out = [f"Generated by `scripts/gpu_tables.py` from {len(names)} run(s) under docs/gpu-runs/; do not edit."]
    for n in names:
        try:
            out += [""] + run_part(root, n, os.path.dirname(os.path.abspath(doc)))
        except gpu_manifest.Problem as e:
            raise gpu_manifest.Problem(f"{os.path.join(root, n)}: {e}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=os.path.join(TOP, "docs", "gpu-runs"))
    ap.add_argument("--doc", default=os.path.join(TOP, "docs", "PERFORMANCE.md"))
    ap.add_argument("--check", action="store_true", help="exit 1 with a diff when the doc's tables are stale")
    a = ap.parse_args()
    try:
        return marked_section.update(a.doc, BEGIN, END, lambda: generate(a.runs, a.doc), a.check, "gpu_tables",
                                     "GPU tables", a.runs)
    except gpu_manifest.Problem as e:
        print(f"gpu_tables: a kept run does not match its manifest: {e}", file=sys.stderr)
        return 2

if __name__ == "__main__":
    sys.exit(main())
