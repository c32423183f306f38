"""Keeping a GPU run and the tables made from it, without a GPU: scripts/gpu_manifest.py,
scripts/gpu_keep.sh and scripts/gpu_tables.py on a synthetic run built here, in the schemas that
gpu_session.sh, gpu_perf.sh (kformer-kernel-bench, bench/attention_vs_sdpa.py,
bench/step_vs_torch_gpu.py, gpu_perf_summary.py) and gpu_check.sh write, with numbers chosen so that
each generated figure is known. Also gpu_session.sh on a machine with a stand-in nvidia-smi and no
bundle: at most 8 files in OUTDIR, a manifest that gpu_keep.sh accepts, the flash step's refusal
(no CUDA device) and the SM-share step's (no bundle) among its exits.

Asserts: the generated rows (the step's eager/kformer = 160/200 = 0.800, MFU, the attention and GEMM
kformer ran (bf16: chosen by auto, fp32: a step JSON from before kernels.attention=auto), attention
over SDPA in fp32 and in bf16 with vendor's speed over SDPA's at issue 35's four shapes,
memory-bound fractions (beside the large copy and a copy of each case's own size), the step by kernel
family (kformer's and eager's), GEMM, the profile, the targets' verdicts; the vendor target's FAIL and its
n/a while a shape is missing); --check passes on the written doc
and fails (exit 1, with a diff) once a number in it is edited, and fails (exit 2) once a kept file
is edited; the one line when no run is kept; gpu_keep.sh's refusals (exit 2): a changed file, an
unlisted one, one over 512 KiB, a binary, a run without a GPU, a folder kept already; the
manifest writer trims a big log to its tail and leaves out a big JSON and a binary.
Usage: gpu_tables_test.py SOURCE_DIR
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "scripts"))
import gpu_manifest  # noqa: E402
import gpu_perf_summary  # noqa: E402

PY = "/usr/bin/python3"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def dump(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        if isinstance(obj, str):
            f.write(obj)
        else:
            json.dump(obj, f, indent=1)


def bench(name, ms, **counters):
    """One kformer-kernel-bench case as Google Benchmark's JSON writes it."""
    full = f"{name}/min_time:0.300/manual_time"
    return {"name": full, "run_name": full, "run_type": "iteration", "repetitions": 1, "threads": 1,
            "iterations": 10, "real_time": ms, "cpu_time": ms, "time_unit": "ms", **counters}


def step(precision, kformer, eager, compiled, flops=6.0e12, ceiling=45.0, chosen=None):
    """bench/step_vs_torch_gpu.py's --json (the fields finish() and the summary read); chosen: the
    (attention, GEMM) that kernels.*=auto picked, else the JSON of a script that pinned them."""
    k = {"step_ms_rounds": [kformer, kformer], "step_ms": kformer, "loss1": 10.99, "gemm_ceiling_tflops": ceiling,
         "gemm_ceiling": {"impl": "vendor", "shape": "8192x3072x768"}, "mfu_report": 0.5,
         "tflops": flops / kformer * 1e-9, "mfu": flops / kformer * 1e-9 / ceiling, "mfu_vs_torch_bf16_matmul": None}
    out = {"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "precision": precision,
           "shape": "gpt2", "steps": 10, "warmup": 3, "rounds_asked": 2, "rounds": 2, "attention": "sdpa",
           "kformer_attention": "batched_gemm", "kformer": k, "flops_per_step": flops, "flops_basis": "model", "init": "torch generator",
           "torch_matmul_tflops": {"fp32": 50.0, "bf16": 600.0}}
    for name, ms in (("eager", eager), ("compile", compiled)):
        out[name] = {"step_ms_rounds": [ms, ms], "step_ms": ms, "tflops": flops / ms * 1e-9, "loss1": 10.99,
                     "torch_over_kformer": ms / kformer}
    out["compile"].update(ok=True, compile_s=40.0)
    if chosen:
        out.update(kformer_attention="auto", kformer_gemm="auto")
        k["kernels_attention"] = {"setting": "auto", "kind": chosen[0], "precision": precision, "timed_at": "B8 T1024",
                                  "reason": f"{precision} fwd+bwd TFLOP/s: fused 50, batched_gemm 120, vendor 300 at B8 T1024",
                                  "tflops": {"fused": 50.0, "batched_gemm": 120.0, "vendor": 300.0}}
        k["kernels_gemm"] = {"setting": "auto", "impl": chosen[1], "reason": "vendor 600 TFLOP/s, native 90",
                             "precision": precision, "native_tflops": 90.0, "vendor_tflops": 600.0}
        k["kinds_rounds"] = [{"attention": chosen[0], "gemm": chosen[1]}] * 2
    if precision == "bf16":
        k["mfu_vs_torch_bf16_matmul"] = k["tflops"] / 600.0
    return out


def sdpa_row(case, shape, dtype, fused, batched, sdpa):
    return {"case": case, "shape": dict(zip(("B", "H", "KV", "T", "hd"), shape)), "dtype": dtype, "sdpa_fwd_ms": sdpa / 3,
            "sdpa_fwd_bwd_ms": sdpa, "kformer_fused_fwd_ms": fused / 3, "kformer_fused_bwd_ms": fused * 2 / 3,
            "kformer_fused_fwd_bwd_ms": fused, "kformer_naive_fwd_bwd_ms": None,
            "fused_over_sdpa": fused / sdpa if dtype == "fp32" else None, "naive_over_fused": None,
            "kformer_batched_gemm_fwd_bwd_ms": batched, "batched_gemm_over_sdpa": batched / sdpa if dtype == "fp32" else None}


def sdpa16(case, shape, sdpa, kformer):
    """A bf16_rows entry of bench/attention_vs_sdpa.py: kformer's kinds (fwd+bwd ms) against SDPA in bf16."""
    row = {"case": case, "shape": dict(zip(("B", "H", "KV", "T", "hd"), shape)), "dtype": "bf16", "sdpa_fwd_ms": sdpa / 3,
           "sdpa_fwd_bwd_ms": sdpa}
    for kind in ("naive", "fused", "batched_gemm", "vendor"):
        row[f"kformer_{kind}_fwd_bwd_ms"] = kformer.get(kind)
        row[f"{kind}_over_sdpa"] = kformer[kind] / sdpa if kind in kformer else None
    return row


def fake_run(d):
    """A run folder as gpu_session.sh leaves it before its manifest."""
    smi = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)\n| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04 |\n"
    for sub in ("check", "perf", "calibrate"):
        dump(f"{d}/{sub}/nvidia-smi.txt", smi)
    dump(f"{d}/bundle/MANIFEST", "arch HOPPER90\ngit c49a7e8\ncpu_tiny_loss1 5.5\n")
    dump(f"{d}/check/gpu_check.json", {"error": None, "bundle": {"git": "c49a7e8"}, "gpus": ["GPU 0: NVIDIA H100"],
         "steps": [{"name": "test_kernels_cuda", "kind": "gtest", "rc": 0, "seconds": 9.0, "note": "", "tests": 95,
                    "failures": 0, "disabled": 0, "failed": []},
                   {"name": "tiny-vs-cpu", "kind": "compare", "rc": 0, "seconds": 0.0,
                    "note": "GPU 5.5 vs CPU 5.5: relative 9.00e-09 (limit 1e-05)"},
                   {"name": "gpt2-124m", "kind": "kformer", "rc": 0, "seconds": 20.0, "note": "GPT-2 124M shapes in fp32",
                    "losses": [11.0, 10.9], "summary": {"step_ms_median": 203.25}}],
         "passed": ["test_kernels_cuda", "tiny-vs-cpu", "gpt2-124m"], "failed": [], "ok": True})
    cases = [bench("gemm/native/2048x768x2304", 1.0, gflops=7248.0, ceiling_gflops=14496.0, vs_ceiling=0.5),
             bench("gemm/vendor/2048x768x2304", 0.5, gflops=14496.0),
             bench("gemm_bf16/native/2048x768x2304", 0.4, gflops=18000.0, vs_ceiling=2.5),
             bench("gemm_bf16/vendor/2048x768x2304", 0.04, gflops=180000.0),
             bench("matmul_bwd/native/2048x768x2304", 2.5, gflops=5800.0, ceiling_gflops=14496.0, vs_ceiling=0.4)]
    for impl, (fwd, bwd) in {"naive": (12.0, 25.0), "fused": (3.0, 5.0), "batched_gemm": (0.5, 1.1)}.items():
        for key, scale in (("T2048", 1.0), ("T2048/hd128", 2.0)):
            cases += [bench(f"attention/{impl}/{key}", fwd * scale, gflops=1.0),
                      bench(f"attention_bwd/{impl}/{key}", bwd * scale, gflops=1.0)]
        cases += [bench(f"attention_bf16/{impl}/T1024", fwd / 2, gflops=1.0),
                  bench(f"attention_bf16_bwd/{impl}/T1024", bwd / 2, gflops=1.0)]
    cases += [bench("attention_bf16/fused/T1024/hd128", 2.5, gflops=1.0),
              bench("attention_bf16_bwd/fused/T1024/hd128", 4.5, gflops=1.0)]
    # vendor (cuDNN) at issue 35's shapes: fwd+bwd 0.55, 1.70, 0.70, 2.40 ms against SDPA's 0.50,
    # 1.60, 0.60, 2.00 (sdpa16 below): of SDPA's speed 0.91, 0.94, 0.86, 0.83 (the worst).
    for key, (fwd, bwd) in {"T1024": (0.15, 0.40), "T2048": (0.5, 1.2), "T1024/hd128": (0.2, 0.5),
                            "T2048/hd128": (0.8, 1.6)}.items():
        cases += [bench(f"attention_bf16/vendor/{key}", fwd, gflops=1.0),
                  bench(f"attention_bf16_bwd/vendor/{key}", bwd, gflops=1.0)]
    for name, gbps, vs in (("layernorm/fwd/8192x768", 1450.0, 0.363), ("layernorm_bf16/fwd/8192x768", 780.0, 0.195),
                           ("residual/fwd/8192x768", 3711.0, 0.924), ("probe_one_lane/residual/fwd/8192x768", 1188.0, 0.297)):
        cases.append(bench(name, 0.01, gbps=gbps, copy_gbps=4000.0, vs_ceiling=vs,
                           # a copy of the case's bytes per call beside it (session 53): 2900 GB/s
                           copy_same_gbps=2900.0, vs_same_size=gbps / 2900.0))
    cases.append(dict(bench("rope/fwd/8192x768", 0.0), error_occurred=True, error_message="cut"))
    dump(f"{d}/perf/kernel_bench.json", {"context": {"kformer_git": "c49a7e8abcde", "kokkos_execution_space": "Cuda",
                                                    "blas": "cuBLAS", "host_name": "vm"}, "benchmarks": cases})
    dump(f"{d}/perf/sdpa.json", {"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130",
                                 "attention": "sdpa", "T": 2048,
                                 "rows": [sdpa_row("T2048", (1, 12, 12, 2048, 64), "fp32", 8.0, 1.6, 1.25),
                                          sdpa_row("T2048", (1, 12, 12, 2048, 64), "bf16", 8.0, 1.6, 0.5),
                                          sdpa_row("T2048/hd128", (1, 4, 2, 2048, 128), "fp32", 16.0, 3.2, 2.0)],
                                 "bf16_rows": [sdpa16("T1024", (8, 12, 12, 1024, 64), 0.50, {"naive": 18.5, "fused": 4.0,
                                                                                             "batched_gemm": 0.8, "vendor": 0.55}),
                                               sdpa16("T1024/hd128", (8, 6, 6, 1024, 128), 0.60, {"fused": 7.0, "vendor": 0.70}),
                                               sdpa16("T2048", (4, 12, 12, 2048, 64), 1.60, {"vendor": 1.70}),
                                               sdpa16("T2048/hd128", (4, 6, 6, 2048, 128), 2.00, {"vendor": 2.40})]})
    dump(f"{d}/perf/step_fp32.json", step("fp32", 200.0, 160.0, 150.0))
    bf16 = step("bf16", 70.0, 35.0, 23.3, chosen=("vendor", "vendor"))
    # where each step went (sessions 52 and 53): kformer's kernel times, eager's profile, ms a step
    bf16["kformer"]["kernel_times"] = {"by_family_ms": {"gemm": 30.0, "norm": 10.0}, "outside_calls_ms": 2.0,
                                       "calls_ms": 40.0, "step_ms": 42.0}
    bf16["eager"]["kernel_families"] = {"by_family_ms": {"gemm": 24.0, "norm": 4.0, "other": 2.0}, "total_ms": 30.0}
    dump(f"{d}/perf/step_bf16.json", bf16)
    p = run([PY, f"{SRC}/scripts/gpu_perf_summary.py", f"{d}/perf", "--md", f"{d}/perf/summary.md",
             "--json", f"{d}/perf/summary.json"])
    check(p.returncode == 0, f"gpu_perf_summary.py on the fixture: {p.stderr[-800:]}")
    dump(f"{d}/perf/gpu_perf.log", "gpu_perf: 5 step(s) ran, 0 did not\n")
    dump(f"{d}/calibrate/h100-measured.yaml", "name: h100-measured\nmemory_gb: 85.0175\nfma_peak_tflops: 63.1097\n"
         "copy_gbps: 2438.2\nlaunch_us: 11.391\ncompute_scale: 1.16644\ngemm:\n  peak_tflops: 63.1097\n"
         "  max_efficiency: 0.708459\nbf16:\n  gemm:\n    peak_tflops: 550.532\n    max_efficiency: 1\n")
    dump(f"{d}/calibrate/calibrate.log", "kformer calibrate: wrote h100-measured.yaml\n")
    # bench/flash2_rate.py: 2 x 32 x 8192^2 x 128 = 5.5e11 FLOPs forward in 1.6 ms, 2.5 times them backward in 5 ms
    row = {"B": 1, "T": 8192, "H": 32, "hd": 128, "forward_ms": 1.6, "backward_ms": 5.0, "forward_tflops": 343.6,
           "backward_tflops": 274.9, "fwd_bwd_tflops": 291.5}
    # cuDNN's at H1's shape: 2 x 16 x 4096^2 x 128 = 6.9e10 FLOPs forward in 0.137 ms, backward in 0.35 ms
    crow = {"B": 1, "T": 4096, "H": 16, "hd": 128, "forward_ms": 0.137, "backward_ms": 0.35, "forward_tflops": 501.6,
            "backward_tflops": 490.8, "fwd_bwd_tflops": 493.9}
    # Megatron-LM's kernels (batched) at the chart's shape, every score: 4 x 8 x 16 x 2048^2 x 128 = 2.7e11 FLOPs
    # forward in 3.9 ms, 2.5 times them backward in 8.6 ms
    brow = {"B": 8, "T": 2048, "H": 16, "hd": 128, "causal": False, "forward_ms": 3.9, "backward_ms": 8.6,
            "forward_tflops": 70.5, "backward_tflops": 79.9, "fwd_bwd_tflops": 76.9}
    dump(f"{d}/flash/flash2_rate.json", {"torch": "2.11.0+cu130", "dtype": "bf16",
                                        "backends": {"flash": [row], "cudnn": [crow], "batched": [brow]},
                                        "skipped": {"efficient": "no kernel"}, "flash2_tflops": 291.5,
                                        "batched_gemm_tflops": {"128": {"2048": 76.9}}})
    # kformer-sm-share: a GEMM of 1000 us alone, 1250 beside 24 of 132 SMs held (the SM share's 132/108 = 1.222)
    dump(f"{d}/contend/sm_share.json", {"device": "NVIDIA H100 80GB HBM3", "sms": 132, "iters": 20, "cases": [
        {"kernel": "gemm", "shape": [8192, 4096, 4096], "held_sms": 24, "traffic_target_gbps": 900, "traffic_gbps": 871.4,
         "alone_us": 1000.0, "beside_us": 1250.0, "ratio": 1.25, "sm_share_ratio": 132 / 108}]})


def tables(runs, doc, *extra):
    return run([PY, f"{SRC}/scripts/gpu_tables.py", "--runs", runs, "--doc", doc, *extra])


def keep(fetched, runs, *name):
    return run([f"{SRC}/scripts/gpu_keep.sh", fetched, *name], env=dict(os.environ, KFORMER_GPU_RUNS=runs))


def test_tables(tmp):
    fetched, runs, doc = f"{tmp}/fetched", f"{tmp}/docs/gpu-runs", f"{tmp}/docs/PERFORMANCE.md"
    fake_run(fetched)
    with open(os.devnull, "w") as null:
        subprocess.run([PY, f"{SRC}/scripts/gpu_manifest.py", "write", fetched, "--command", "scripts/gpu_session.sh 180 90 310",
                        "--started", "2026-11-27T10:00:00Z", "--exit", "check=0", "--exit", "calibrate=0", "--exit", "perf=0"],
                       stdout=null, check=True)
    dump(doc, "# Performance\n\nprose\n\n<!-- gpu-tables:begin -->\nstale\n<!-- gpu-tables:end -->\n\nafter\n")
    p = tables(runs, doc, "--check")
    check(p.returncode == 1 and "No GPU run is kept yet" in p.stdout, f"--check with no run: {p.returncode} {p.stdout}")
    p = tables(runs, doc)
    check(p.returncode == 0 and open(doc).read().count("No GPU run is kept yet") == 1, f"no run: {p.stderr}")

    p = keep(fetched, runs)
    check(p.returncode == 0 and os.path.isfile(f"{runs}/2026-11-27-h100/perf/step_fp32.json"), f"gpu_keep: {p.stderr}")
    p = keep(fetched, runs)
    check(p.returncode == 2 and "kept already" in p.stderr, f"gpu_keep twice: {p.returncode} {p.stderr}")
    p = tables(runs, doc)
    check(p.returncode == 0, f"gpu_tables.py: {p.stderr}")
    text = open(doc).read()
    check(text.startswith("# Performance\n\nprose\n\n<!-- gpu-tables:begin -->\n") and text.endswith("<!-- gpu-tables:end -->\n\nafter\n"),
          "the text outside the markers changed")
    for row in ["#### 2026-11-27-h100: NVIDIA H100 80GB HBM3, `scripts/gpu_session.sh 180 90 310`",
                # eager/kformer 160/200, compile 150/200; 6e12 FLOP in 0.2 s = 30 TFLOP/s over 45: MFU 0.667
                # fp32: a JSON from before the kinds were recorded; bf16: auto chose vendor for both
                "| fp32 | batched_gemm | vendor | 200.00 | 160.00 | 0.800 | 150.00 | 0.750 | 30 | 45 | 0.667 | 2 |",
                "| bf16 | vendor (auto) | vendor (auto) | 70.00 | 35.00 | 0.500 | 23.30 | 0.333 | 85.7 | 45 | 1.905 | 2 |",
                # fwd+bwd: naive 37, fused 8, batched 1.6 ms; SDPA 1.25: 6.40 and 1.28
                "| T2048 | 1,12,12,2048,64 | 37.000 | 8.000 | 1.600 | 1.250 | 0.500 | 6.40 | 1.28 |",
                "| T2048/hd128 | 1,4,2,2048,128 | 74.000 | 16.000 | 3.200 | 2.000 | - | 8.00 | 1.60 |",
                "| T1024 | 8,12,12,1024,64 | 18.500 | 4.000 | 0.800 | 0.550 | 0.500 | 0.91 |",
                "| T1024/hd128 | 8,6,6,1024,128 | - | 7.000 | - | 0.700 | 0.600 | 0.86 |",
                "| T2048/hd128 | 4,6,6,2048,128 | - | - | - | 2.400 | 2.000 | 0.83 |",
                "| vendor attention fwd+bwd >= 0.8 of SDPA (bf16, T 1024/2048, hd 64/128; SDPA's time over vendor's) "
                "| 0.83 of SDPA (worst of 4: T2048/hd128) | PASS |",
                "| layernorm/fwd/8192x768 | 1450 | 0.363 | 780 | 0.195 | 4000 | 0.500 | 0.269 |",
                "| probe_one_lane/residual/fwd/8192x768 | 1188 | 0.297 | - | - | 4000 | 0.410 | - |",
                # the bf16 step by family: kformer 30 of 42 ms in GEMMs, eager 24 of its 30; norms 10 and 4
                "| bf16 | gemm | 30.000 | 71.4% | 24.000 | 80.0% | 1.25 |",
                "| bf16 | norm | 10.000 | 23.8% | 4.000 | 13.3% | 2.50 |",
                "| bf16 | other | 0.000 | 0.0% | 2.000 | 6.7% | - |",
                "| bf16 | outside the calls | 2.000 | 4.8% | - | - | - |",
                "| gemm | 2048x768x2304 | 7248.0 | 14496.0 | 0.500 |",
                "| calibrate/h100-measured.yaml | 85.0 | 63.1 | 44.7 | 551 | 2438 | 11.4 | 1.166 |",
                "| flash | 1x8192x32x128 | 1.600 | 344 | 5.000 | 275 | 292 |",
                "by sequence length: T 8192: 292 TFLOP/s (lowest 292;",
                "294 and 308 on an H100); not timed: efficient: no kernel.",
                "| cudnn | 1x4096x16x128 | 0.137 | 502 | 0.350 | 491 | 494 |",
                "and `cudnn_backward_tflops` by sequence length: T 4096: 502 and 491 TFLOP/s (the H100 profiles take",
                "| batched | 8x2048x16x128 | 3.900 | 70 | 8.600 | 80 | 77 |",
                "`bf16.attention.batched_gemm_tflops`: heads of 128: T 2048: 77 TFLOP/s (the profiles take",
                "| gemm | 8192x4096x4096 | 24 | 900 | 871 | 1000.0 | 1250.0 | 1.250 | 1.222 |",
                "| kformer step no slower than PyTorch eager (fp32) | torch/kformer 0.800 (160.0 / 200.0 ms; kformer: "
                "attention batched_gemm, GEMM vendor) | FAIL |",
                "| kformer step against torch.compile (bf16) | torch/kformer 0.333 (23.3 / 70.0 ms; kformer: "
                "attention vendor (auto), GEMM vendor (auto)) | info |",
                "| gpt2-124m | passed | GPT-2 124M shapes in fp32; step 203.2 ms |",
                "Correctness (`check/gpu_check.json`): 3 of 3 steps passed; CUDA test binaries: 1, 95 tests, 0 failures.",
                "bundle c49a7e8 (HOPPER90)", "[manifest.json](gpu-runs/2026-11-27-h100/manifest.json)"]:
        check(row in text, f"generated doc lacks: {row}")
    check("rope/fwd" not in text, "a failed benchmark case made a row")

    p = tables(runs, doc, "--check")
    check(p.returncode == 0, f"--check on the doc just written: {p.returncode} {p.stdout[-500:]} {p.stderr}")
    with open(doc, "w") as f:  # a planted fault: one figure edited by hand
        f.write(text.replace("| 0.800 | 150.00 |", "| 0.850 | 150.00 |"))
    p = tables(runs, doc, "--check")
    check(p.returncode == 1 and "-| fp32 | batched_gemm | vendor | 200.00 | 160.00 | 0.850" in p.stdout,
          f"--check missed an edited figure: {p.returncode} {p.stdout[-500:]}")
    dump(doc, text)
    kept = f"{runs}/2026-11-27-h100/perf/step_fp32.json"
    raw = open(kept).read()
    with open(kept, "w") as f:  # a kept figure edited after the run, the size unchanged: only the sha256 shows it
        f.write(raw.replace('"step_ms": 200.0', '"step_ms": 201.0'))
    check(raw.count('"step_ms": 200.0') == 1, "the fixture's kformer step_ms is not where the planted edit expects it")
    p = tables(runs, doc, "--check")
    check(p.returncode == 2 and "perf/step_fp32.json: its size or sha256 differs" in p.stderr,
          f"--check missed an edited raw file: {p.returncode} {p.stderr}")
    dump(f"{tmp}/nomarkers.md", "# no markers\n")
    p = tables(runs, f"{tmp}/nomarkers.md", "--check")
    check(p.returncode == 2 and "needs one" in p.stderr, f"a doc without markers: {p.returncode} {p.stderr}")
    return fetched


def test_keep_refusals(tmp, fetched):
    runs = f"{tmp}/refused"

    def refused(what, why, prepare):
        d = f"{tmp}/case-{what}"
        subprocess.run(["cp", "-R", fetched, d], check=True)
        prepare(d)
        p = keep(d, runs)
        check(p.returncode == 2 and why in p.stderr and len(p.stderr.strip().splitlines()) == 1,
              f"gpu_keep, {what}: exit {p.returncode}, '{p.stderr.strip()}' (expected exit 2 and '{why}')")

    def relist(d, rel, data):
        """A file added with its true sha256 in the manifest, so only the size or binary rule can refuse it."""
        with open(f"{d}/{rel}", "wb") as f:
            f.write(data)
        m = json.load(open(f"{d}/manifest.json"))
        m["files"].append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        dump(f"{d}/manifest.json", m)

    refused("changed", "perf/sdpa.json: its size or sha256 differs", lambda d: open(f"{d}/perf/sdpa.json", "a").write("\n"))
    refused("unlisted", "perf/extra.txt: not in manifest.json", lambda d: dump(f"{d}/perf/extra.txt", "x"))
    refused("big", "over the 512 KiB", lambda d: relist(d, "perf/big.log", b"x\n" * 300000))
    refused("binary", "not text", lambda d: relist(d, "perf/core.bin", b"\x7fELF\0\0"))
    refused("missing", "check/gpu_check.json: listed in manifest.json but missing", lambda d: os.remove(f"{d}/check/gpu_check.json"))

    def no_gpu(d):
        m = json.load(open(f"{d}/manifest.json"))
        m["gpu"] = None
        dump(f"{d}/manifest.json", m)
    refused("nogpu", "names no GPU", no_gpu)
    kept = os.listdir(runs) if os.path.exists(runs) else []
    check(not kept, f"a refused run was kept: {kept}")


def test_manifest_trims(tmp):
    d = f"{tmp}/big"
    dump(f"{d}/perf/gpu_perf.log", "early line\n" * 30000 + "the end\n")  # 330 KB
    dump(f"{d}/perf/kernel_bench.json", "[" + "0," * 300000 + "0]")      # 600 KB
    with open(f"{d}/perf/core", "wb") as f:
        f.write(b"\0\1\2")
    subprocess.run([PY, f"{SRC}/scripts/gpu_manifest.py", "write", d, "--command", "x"], capture_output=True, check=True)
    m = json.load(open(f"{d}/manifest.json"))
    files = {e["path"]: e for e in m["files"]}
    log = open(f"{d}/perf/gpu_perf.log").read()
    check(files["perf/gpu_perf.log"]["trimmed_from"]["size"] == 330008 and log.endswith("the end\n")
          and len(log) <= gpu_manifest.LOG_TAIL + 100 and log.startswith("[gpu_session: the last "), "the log was not cut to its tail")
    check({e["path"] for e in m["left_out"]} == {"perf/kernel_bench.json", "perf/core"} and not os.path.exists(f"{d}/perf/core"),
          f"left out: {m['left_out']}")


def test_vendor_verdicts(fetched):
    """Issue 35's row on the fixture's perf/ with one figure changed: a slow vendor fails, a missing
    shape leaves n/a (with the figure), a bench without vendor cases says "not built", and a vendor
    case the bench could not run names the error."""
    perf = f"{fetched}/perf"
    kb = json.load(open(f"{perf}/kernel_bench.json"))
    sdpa = json.load(open(f"{perf}/sdpa.json"))

    def row(kb, sdpa):
        s = gpu_perf_summary.Summary()
        gpu_perf_summary.vendor_rows(s, gpu_perf_summary.bench_cases(kb), None, sdpa, None, kb)
        return s.targets[0]
    t = row(kb, sdpa)
    check(t["verdict"] == "PASS" and abs(t["value"] - 2.0 / 2.4) < 1e-12, f"vendor row on the fixture: {t}")
    slow = json.loads(json.dumps(sdpa))
    slow["bf16_rows"][0]["vendor_over_sdpa"] = 1.5  # T1024 at 0.67 of SDPA's speed
    t = row(kb, slow)
    check(t["verdict"] == "FAIL" and t["measured"].startswith("0.67 of SDPA (worst of 4: T1024)"), f"a slow vendor: {t}")
    short = dict(sdpa, bf16_rows=sdpa["bf16_rows"][:3])
    t = row(kb, short)
    check(t["verdict"] == "n/a" and t["measured"].endswith("; not measured: T2048/hd128") and t.get("value"),
          f"a shape missing: {t}")
    no_vendor = dict(kb, benchmarks=[b for b in kb["benchmarks"] if "/vendor/" not in b["name"] or "gemm" in b["name"]])
    t = row(no_vendor, dict(sdpa, bf16_rows=[]))
    check(t["verdict"] == "n/a" and t["measured"].startswith("not built:"), f"no vendor case: {t}")
    failed = dict(kb, benchmarks=[dict(b, error_occurred=True, error_message="cuDNN: no engine for hd=128")
                                  if "/vendor/" in b["name"] and "gemm" not in b["name"] else b for b in kb["benchmarks"]])
    t = row(failed, dict(sdpa, bf16_rows=[]))
    check(t["verdict"] == "n/a" and "vendor case(s) failed: cuDNN: no engine for hd=128" in t["measured"],
          f"vendor cases that failed: {t}")


def test_session(tmp):
    """gpu_session.sh where nothing can run (no bundle): its OUTDIR still has the manifest and archive."""
    smi = f"{tmp}/bin/nvidia-smi"
    dump(smi, "#!/bin/sh\n[ \"$1\" = -L ] && echo 'GPU 0: NVIDIA H200 (UUID: GPU-9)' || echo 'Driver Version: 580.1'\n")
    os.chmod(smi, 0o755)
    out = f"{tmp}/session"
    env = dict(os.environ, PATH=f"{tmp}/bin:{os.environ['PATH']}", OUT=out, KFORMER_BUNDLE_DIR=f"{tmp}/no-bundle",
               KFORMER_PERF_SKIP="gemm", PYTHON="/usr/bin/python3")
    p = run([f"{SRC}/scripts/gpu_session.sh", "10", "10", "10", "0", "0", "0", "20", "10", "45"], env=env)
    files = [os.path.relpath(os.path.join(r, f), out) for r, _, fs in os.walk(out) for f in fs]
    check(p.returncode == 2 and "manifest.json" in files and "gpu_session.tgz" in files and len(files) <= 8,
          f"gpu_session.sh without a bundle: exit {p.returncode}, files {files}: {p.stdout[-800:]}")
    m = json.load(open(f"{out}/manifest.json"))
    # bench/flash2_rate.py (the seventh budget) finds no CUDA device here: one line, exit 2, kept in flash/
    # and kformer-sm-share and kformer-sustained (the eighth and ninth) are not run without the bundle's
    # environment: exit 2 each, kept in contend/ and sustain/
    check(m["command"] == "KFORMER_PERF_SKIP=gemm scripts/gpu_session.sh 10 10 10 0 0 0 20 10 45" and m["gpu_slug"] == "h200"
          and m["exit"] == {"check": 2, "calibrate": 2, "perf": 2, "flash": 2, "contend": 2, "sustain": 2},
          f"the session's manifest: {m}")
    for log in ("contend/sm_share.log", "sustain/sustained.log"):
        check(any(f["path"] == log for f in m["files"]), f"the session kept no {log}: {m['files']}")
    p = keep(out, f"{tmp}/session-runs")
    check(p.returncode == 0, f"gpu_keep.sh on the session's folder: {p.stderr}")
    # A second call on a warm machine: zero budgets leave check, calibrate and perf out of the run and
    # of its exit statuses; the optional parts still run and are kept.
    out2 = f"{tmp}/session-2"
    p = run([f"{SRC}/scripts/gpu_session.sh", "0", "0", "0", "0", "0", "0", "20", "10", "45"], env=dict(env, OUT=out2))
    m = json.load(open(f"{out2}/manifest.json"))
    check(m["exit"] == {"flash": 2, "contend": 2, "sustain": 2} and "perf exit -1" in p.stdout
          and not any(f["path"].startswith(("check/", "perf/")) for f in m["files"]),
          f"gpu_session.sh with zero budgets for check, calibrate and perf: {m['exit']}, {m['files']}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        fetched = test_tables(tmp)
        test_keep_refusals(tmp, fetched)
        test_vendor_verdicts(fetched)
        test_manifest_trims(tmp)
        test_session(tmp)
    for f in failures:
        print("FAIL:", f)
    print(f"gpu_tables_test: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
