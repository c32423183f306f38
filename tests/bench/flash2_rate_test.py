#!/usr/bin/python3
"""bench/flash2_rate.py on this CPU at tiny shapes (not a timed test: no rate's size is checked).
Debian's torch has no scaled_dot_product_attention, so every backend is listed with that reason
and the explicit attention stands in; its rows carry predict's FLOP convention (forward the causal
half of the two products, 2 B H T^2 hd; backward 2.5 times that) over their own times, and no FA2
rate is reported from a stand-in. Where torch has SDPA, the flash backend on the CPU is timed or
skipped with a reason. Backend "batched" (Megatron-LM's baddbmm, softmax, bmm) runs with any torch:
its output is softmax(Q K^T / sqrt(hd)) V against float64, its rows count both products over the full
scores, and its rates come back by head size and T as a profile's batched_gemm_tflops. Bad input is
one line and exit 2."""
import json
import math
import os
import subprocess
import sys
import tempfile

top = sys.argv[1]
script = os.path.join(top, "bench", "flash2_rate.py")
fails = []


def check(ok, what):
    if not ok:
        fails.append(what)


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "flash2.json")
    r = subprocess.run(["/usr/bin/python3", script, "--device", "cpu", "--dtype", "fp32", "--shapes", "1x64x2x16,2x32x3x8",
                        "--reps", "2", "--warmup", "1", "--json", out], capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr)
    if r.returncode != 0:
        sys.exit(f"FAIL: flash2_rate.py exited {r.returncode}")
    with open(out) as f:
        res = json.load(f)
    rows = [row for name, rs in res["backends"].items() for row in rs]
    check(len(rows) >= 2, f"{len(rows)} rows timed for two shapes")
    for name, rs in res["backends"].items():
        check(all(row["causal"] == (name != "batched") for row in rs), f"{name}: causal flags {[r['causal'] for r in rs]}")
    batched = res["backends"].get("batched", [])
    check(len(batched) == 2, f"{len(batched)} batched rows for two shapes")
    for row in batched:
        rate = res["batched_gemm_tflops"][str(row["hd"])][str(row["T"])]
        check(math.isclose(rate, row["fwd_bwd_tflops"]), f"batched_gemm_tflops {rate} is not the row's {row['fwd_bwd_tflops']}")
    for row in rows:
        product = (4.0 if not row["causal"] else 2.0) * row["B"] * row["H"] * row["T"] ** 2 * row["hd"]
        for key, flops, ms in (("forward_tflops", product, row["forward_ms"]),
                               ("backward_tflops", 2.5 * product, row["backward_ms"]),
                               ("fwd_bwd_tflops", 3.5 * product, row["forward_ms"] + row["backward_ms"])):
            check(math.isfinite(row[key]) and row[key] > 0 and math.isclose(row[key], flops / (ms * 1e9), rel_tol=1e-6),
                  f"{key} {row[key]} is not {flops:.0f} FLOPs over {ms} ms")
    if "math" in res["backends"]:  # the stand-in: every backend said why not, and no FA2 figure
        check(set(res["skipped"]) == {"flash", "cudnn", "efficient"}, f"skipped: {res['skipped']}")
        check(res["flash2_tflops"] is None, f"a stand-in reported flash2_tflops {res['flash2_tflops']}")
    else:
        check("flash" in res["backends"] or "flash" in res["skipped"], "flash neither timed nor skipped")
    for args, word in ((["--shapes", "1x2x3"], "BxTxHxhd"), (["--backends", "triton"], "triton")):
        bad = subprocess.run(["/usr/bin/python3", script, "--device", "cpu", "--reps", "1", "--warmup", "0"] + args,
                             capture_output=True, text=True, timeout=120)
        lines = bad.stderr.strip().splitlines()
        check(bad.returncode == 2 and len(lines) == 1 and word in lines[0],
              f"{args}: exit {bad.returncode}, stderr {bad.stderr!r}")
sys.path.insert(0, os.path.join(top, "bench"))
import torch  # noqa: E402
import flash2_rate  # noqa: E402

torch.manual_seed(0)
q, k, v = (torch.randn(2, 3, 24, 8, dtype=torch.float64) for _ in range(3))
ref = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(8), dim=-1) @ v
got = flash2_rate.batched_attention(q.float(), k.float(), v.float()).double()
check(torch.allclose(got, ref, atol=1e-5, rtol=1e-5), f"batched attention off by {(got - ref).abs().max().item()}")
if fails:
    sys.exit("FAIL: " + "; ".join(fails))
print("flash2_rate: rows in predict's FLOP convention, stand-in reported as such, bad input refused")
