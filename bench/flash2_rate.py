#!/usr/bin/python3
"""PyTorch's scaled_dot_product_attention per backend (FlashAttention-2, cuDNN's fused kernel, the
memory-efficient one) at the attention shapes of the published rows predict costs (issue 37):
the rate a machine profile's `bf16.attention.flash2_tflops` stands for, measured instead of taken
from the FlashAttention papers (228 TFLOP/s on an A100, 346 on an H100). Backend "batched" is
Megatron-LM's attention kernels (CoreAttention: torch.baddbmm for QK^T, a softmax, torch.bmm for PV)
without mask or dropout, as the FlashAttention-2 charts' PyTorch bars time them: the rate a
profile's `bf16.attention.batched_gemm_tflops` stands for (head size -> T -> TFLOP/s).

    bench/flash2_rate.py [--shapes 1x8192x32x128,...] [--backends flash,cudnn,efficient,batched]
        [--dtype bf16|fp32] [--device cuda|cpu] [--reps 10] [--warmup 3] [--json OUT]

A shape is BxTxHxhd: batch, sequence, query heads (K and V repeated to them, as torchtitan's
repeat_kv hands SDPA), head size; causal. The defaults: Llama 3 8B at local batch 1 and T 8192
(torchtitan's T5/T6 and, at batch 2, its H100 rows), Llama 2 13B at batch 2 and T 4096 (T3, T4,
T7), the 70B's 64 heads at T 8192 (T1), Megatron-Core's 1.7B GPT (H1: 16 heads at T 4096) and its
70B at TP 8 (H5: 8 heads a rank), where cuDNN's rows check the H100 profiles' cudnn_forward_tflops
and cudnn_backward_tflops (FlashAttention-3's published rates), and the charts' own shapes (16k tokens
over hidden 2048 at T 2048: 8x2048x16x128, 8x2048x32x64), where "batched" checks their PyTorch bars;
and TP-split heads of one sequence at T 8192 and 2048 (8 or 16 heads), which with H1's and H5's check
the profiles' half_rate_share at other lengths than 4096 (scripts/attention_size.py).
FLOPs as predict counts them (kernel_costs.cpp, system_attention_us): the causal half of QK^T and
PV, 2 B H T^2 hd forward, 2.5 times that backward (its recomputed scores, dV, dP, dQ, dK); for
"batched", which computes every score, both products over the full scores, twice that. Median of
--reps timed calls after --warmup more (CUDA events on a GPU); the backward is the forward and
backward's time less the forward's. The report's "flash2_tflops" is the flash backend's forward and
backward rate together at each shape and their lowest, the figure a profile's ceiling takes (null
where flash did not run); "batched_gemm_tflops" the batched rows' rates together, by head size and
T, the form of the profile's key. --json is written after each backend, so that a run its time
budget stops (gpu_session.sh's `timeout`) keeps what it timed. Bad input (a shape, a backend, no
GPU) is one line and exit 2.

A backend this torch or GPU cannot run (cuDNN's before torch 2.5, flash in fp32) is listed with the
reason, not timed. Where torch has no scaled_dot_product_attention (torch < 2.0, as on the CPU test
machine) torch_gpt's explicit softmax(QK^T)V stands in, as backend "math", so the script and its
report are checked off the GPU; "batched" runs there too (torch 1.13 has baddbmm).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "reference"))
import torch  # noqa: E402

import torch_gpt  # noqa: E402
from attention_vs_sdpa import time_ms  # noqa: E402  (median ms after warm-up, CUDA events on a GPU)

DEFAULT_SHAPES = ("1x8192x32x128,2x4096x40x128,1x8192x64x128,1x4096x16x128,1x4096x8x128,8x2048x16x128,8x2048x32x64,"
                  "1x8192x8x128,1x2048x16x128,1x2048x8x128")
BACKENDS = ("flash", "cudnn", "efficient", "batched")
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def die(message):
    """Bad input: one line naming the cause and the fix, exit 2."""
    print(f"flash2_rate: {message}", file=sys.stderr)
    sys.exit(2)


def parse_shapes(text):
    shapes = []
    for s in text.split(","):
        parts = s.lower().split("x")
        if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
            die(f"shape '{s}' is not BxTxHxhd (four positive integers, e.g. 1x8192x32x128)")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def backend_context(name):
    """A context manager that restricts SDPA to one backend, or (None, why not)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # torch >= 2.3
        enum = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION"}[name]
        if not hasattr(SDPBackend, enum):
            return None, f"torch {torch.__version__} has no SDPBackend.{enum}"
        return (lambda: sdpa_kernel(getattr(SDPBackend, enum))), None
    except ImportError:
        pass
    if name == "cudnn":
        return None, f"torch {torch.__version__} has no cuDNN attention backend"
    flags = {"flash": dict(enable_flash=True, enable_math=False, enable_mem_efficient=False),
             "efficient": dict(enable_flash=False, enable_math=False, enable_mem_efficient=True)}[name]
    return (lambda: torch.backends.cuda.sdp_kernel(**flags)), None  # torch 2.0-2.2


def batched_attention(q, k, v):
    """Megatron-LM's CoreAttention without its mask and dropout: baddbmm (the scale as alpha), softmax,
    bmm, over (B H, T, hd) views, every score computed."""
    B, H, T, hd = q.shape
    q3, k3, v3 = (x.reshape(B * H, T, hd) for x in (q, k, v))
    scores = torch.empty(B * H, T, T, dtype=q.dtype, device=q.device)
    scores = torch.baddbmm(scores, q3, k3.transpose(1, 2), beta=0.0, alpha=hd ** -0.5)
    return torch.bmm(torch.softmax(scores, dim=-1), v3).view(B, H, T, hd)


def measure(attend, shape, dtype, device, reps, warmup, full=False):
    B, T, H, hd = shape
    q, k, v = (torch.randn(B, H, T, hd, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    dout = torch.randn(B, H, T, hd, device=device, dtype=dtype)

    def forward():
        with torch.no_grad():
            attend(q, k, v)

    def forward_backward():
        out = attend(q, k, v)
        torch.autograd.grad(out, (q, k, v), dout)

    fwd_ms = time_ms(device, forward, reps, warmup)
    both_ms = time_ms(device, forward_backward, reps, warmup)
    product = (4.0 if full else 2.0) * B * H * T * T * hd  # one product over the full scores or the causal half
    bwd_ms = max(both_ms - fwd_ms, 1e-9)
    return {"B": B, "T": T, "H": H, "hd": hd, "causal": not full, "forward_ms": fwd_ms, "backward_ms": bwd_ms,
            "forward_tflops": product / (fwd_ms * 1e9), "backward_tflops": 2.5 * product / (bwd_ms * 1e9),
            "fwd_bwd_tflops": 3.5 * product / ((fwd_ms + bwd_ms) * 1e9)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")  # the CPU only when asked: a check
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    shapes = parse_shapes(a.shapes)
    backends = a.backends.split(",")
    for name in backends:
        if name not in BACKENDS:
            die(f"unknown backend '{name}': give any of {', '.join(BACKENDS)}")
    if a.device == "cuda" and not torch.cuda.is_available():
        die("no CUDA device here: run it on the lent GPU, or give --device cpu")
    dtype = DTYPES[a.dtype]
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    report = {"command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]), "torch": torch.__version__,
              "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu", "dtype": a.dtype,
              "flops": "forward 2 B H T^2 hd (the causal half of QK^T and PV), backward 2.5 times that; "
                       "batched (not causal): twice those",
              "backends": {}, "skipped": {}}

    def write():  # after each backend, so that a run stopped by its time budget keeps what it timed
        flash = report["backends"].get("flash")  # FlashAttention-2's; none where only the stand-in ran
        report["flash2_tflops"] = min(r["fwd_bwd_tflops"] for r in flash) if flash else None
        batched = {}  # head size -> T -> rate, as a profile's batched_gemm_tflops (the lowest where shapes share both)
        for r in report["backends"].get("batched", []):
            at = batched.setdefault(str(r["hd"]), {})
            at[str(r["T"])] = min(at.get(str(r["T"]), r["fwd_bwd_tflops"]), r["fwd_bwd_tflops"])
        report["batched_gemm_tflops"] = batched or None
        if a.json:
            with open(a.json, "w") as f:
                json.dump(report, f, indent=1)

    sdpa_backends = [b for b in backends if b != "batched"]
    if sdpa is None and sdpa_backends:  # torch < 2.0: the explicit attention, so the report's form is checked anyway
        math_attention = torch_gpt.attention_impl()[0]
        report["skipped"] = {b: f"torch {torch.__version__} has no scaled_dot_product_attention"
                             for b in sdpa_backends}
        report["backends"]["math"] = [measure(lambda q, k, v: math_attention(q, k, v), s, dtype, a.device, a.reps, a.warmup)
                                      for s in shapes]
        write()
    elif sdpa is not None:
        for name in sdpa_backends:
            ctx, why = backend_context(name)
            if ctx is None:
                report["skipped"][name] = why
                continue
            rows = []
            try:
                for s in shapes:
                    with ctx():
                        rows.append(measure(lambda q, k, v: sdpa(q, k, v, is_causal=True), s, dtype, a.device,
                                            a.reps, a.warmup))
            except RuntimeError as e:  # this GPU, dtype or shape has no such kernel
                report["skipped"][name] = str(e).splitlines()[0][:300]
                continue
            report["backends"][name] = rows
            write()
    if "batched" in backends:
        try:
            report["backends"]["batched"] = [measure(batched_attention, s, dtype, a.device, a.reps, a.warmup, full=True)
                                             for s in shapes]
        except RuntimeError as e:  # out of memory at a long sequence
            report["skipped"]["batched"] = str(e).splitlines()[0][:300]
    write()
    for name, rows in report["backends"].items():
        for r in rows:
            print(f"{name:9s} B{r['B']} T{r['T']} H{r['H']} hd{r['hd']}: forward {r['forward_ms']:.3f} ms "
                  f"({r['forward_tflops']:.1f} TFLOP/s), backward {r['backward_ms']:.3f} ms "
                  f"({r['backward_tflops']:.1f}), together {r['fwd_bwd_tflops']:.1f} TFLOP/s")
    for name, why in report["skipped"].items():
        print(f"{name:9s} not timed: {why}")


if __name__ == "__main__":
    main()
