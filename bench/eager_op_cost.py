#!/usr/bin/python3
"""What eager PyTorch spends on the host per operator, on one device (issue 37, item 5).

    bench/eager_op_cost.py [--device cuda|cpu] [--json OUT] [--quick] [--budget-s S]

A model that is small for its device runs at the host's pace, not the device's: each operator
costs Python, the dispatcher, autograd's bookkeeping and the launch, whatever the kernel. That
cost is what `kformer predict` needs for predict.host=eager (kernels no faster than the host
issues them) and predict.host=blocking (CUDA_LAUNCH_BLOCKING=1: the host waits for each kernel, as
BLOOM's training ran). Measured here, each the median of repeated timings after a warm-up:

  op_async_us      a chain of tiny in-place adds, one sync at the end: the host's issue rate
  op_autograd_us   a chain of tiny out-of-place multiplies that autograd records (requires_grad)
  op_sync_us       the tiny add with a device synchronisation after each (the blocking case)
  eager_host       one transformer layer's host time, forward and backward: a tiny Llama (host-bound
                   on any device) at 2, 4, 6 and 8 layers, the slope of their fastest repeats; on a GPU also under
                   CUDA_LAUNCH_BLOCKING=1 (a second process: the variable is read when CUDA starts).
                   These are what a profile's eager_host section takes (docs/predict.md)
  step             an 8-layer Llama of seed note 001's size (d 256, 8 heads, 4 kv heads, T 256,
                   micro-batch 2, vocab 32000; --quick: a tiny one of the same structure) forward, backward and AdamW: its time, the aten
                   operators it dispatches (counted with a TorchDispatchMode) and the kernels it
                   launches on a GPU (torch.profiler), so step_us / ops is a per-operator figure of a
                   real step; the same for 4 layers, so that the per-layer count is checked linear
  optimizer        AdamW's step over the model's parameters, foreach (multi-tensor) and per tensor
  dtensor          where torch has DTensor and a one-rank process group can start: the tiny add on
                   a replicated DTensor (the per-operator cost of TP code such as ezpz's), and the
                   tiny model's per-layer host time with each block under FSDP2's fully_shard
  tp_plan          the tiny model's per-layer host time under ezpz's tensor-parallel plan on a
                   one-rank mesh, alone and inside FSDP1, beside the same layer without it, with
                   the model's top (embedding, final norm, head, loss) and AdamW's step beside its
                   layers (bench/tp_plan_host.py: what seed note 001's rows are made of)

On a CPU the figures are the host's alone (no launch, no device queue); the GPU session's figures
(scripts/gpu_session.sh) are the ones a profile takes. Writes one JSON (the figures, torch's
version, the device and host CPU names, the command) and prints a line per figure.
"""
import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

from layer_host import one_rank_group, per_layer_host, sync, timed_us  # this folder's
from tp_plan_host import tp_plan_figures

try:  # torch >= 1.13
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # pragma: no cover
    TorchDispatchMode = None


# --- a Llama of seed note 001's size -------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):  # x (B,T,C)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.w


def rope(x, cos, sin):  # x (B,H,T,hd), rotate-half convention
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-b, a), dim=-1) * sin


class Block(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.qkv = nn.Linear(d, (heads + 2 * kv_heads) * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate_up = nn.Linear(d, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin):  # x (B,T,C)
        B, T, C = x.shape
        q, k, v = self.qkv(self.n1(x)).split([self.h * self.hd, self.kv * self.hd, self.kv * self.hd], dim=-1)
        q = rope(q.view(B, T, self.h, self.hd).transpose(1, 2), cos, sin)
        k = rope(k.view(B, T, self.kv, self.hd).transpose(1, 2), cos, sin)
        v = v.view(B, T, self.kv, self.hd).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0: the scores materialised
            s = (q @ k.transpose(-1, -2)) / self.hd ** 0.5
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            y = s.masked_fill(mask, float("-inf")).softmax(-1) @ v
        x = x + self.o(y.transpose(1, 2).reshape(B, T, C))
        g, u = self.gate_up(self.n2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class Llama(nn.Module):
    def __init__(self, layers, d=256, heads=8, kv_heads=4, ffn=688, vocab=32000, T=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(T).float(), inv)
        self.register_buffer("cos", torch.cat((ang, ang), -1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat((ang, ang), -1).sin(), persistent=False)

    def forward(self, tok, tgt):  # tok, tgt (B,T)
        x = self.emb(tok)
        for b in self.blocks:
            x = b(x, self.cos, self.sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))


class CountOps(TorchDispatchMode if TorchDispatchMode else object):
    """Counts the aten operators dispatched inside it (views included: each costs the host)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


# Seed note 001's model, and the CPU test's of the same structure at a size that runs in a second.
SHAPES = {"seed001": dict(d=256, heads=8, kv_heads=4, ffn=688, vocab=32000, T=256, B=2),
          "tiny": dict(d=32, heads=4, kv_heads=2, ffn=64, vocab=256, T=16, B=1)}


def step_figures(device, layers, reps, dtype, shape, layers_only=False, pick=statistics.median):
    torch.manual_seed(0)
    sh = dict(SHAPES[shape])
    B = sh.pop("B")
    model = Llama(layers, **sh).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tok = torch.randint(0, sh["vocab"], (B, sh["T"]), device=device)
    tgt = torch.randint(0, sh["vocab"], (B, sh["T"]), device=device)
    autocast = (torch.autocast(device_type=device.type, dtype=dtype) if dtype != torch.float32
                else contextlib.nullcontext())

    def step():
        with autocast:
            loss = model(tok, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def forward():
        with autocast:
            model(tok, tgt)

    def forward_backward():
        with autocast:
            loss = model(tok, tgt)
        loss.backward()
        for p in model.parameters():
            p.grad = None

    for _ in range(2):
        step()
    out = {"shape": shape, "layers": layers, "parameters": sum(p.numel() for p in model.parameters())}
    out["forward_us"] = timed_us(forward, device, reps, 1, pick)
    out["forward_backward_us"] = timed_us(forward_backward, device, reps, 1, pick)
    if layers_only:
        return out
    out["step_us"] = timed_us(step, device, reps, 1)
    if TorchDispatchMode is not None:
        counter = CountOps()
        with counter:
            step()
        out["aten_ops"] = counter.n
        out["step_us_per_op"] = out["step_us"] / counter.n
    if device.type == "cuda":
        try:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                step()
                sync(device)
            kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
            out["kernels"] = len(kernels)
            out["kernel_us"] = sum(e.cuda_time_total for e in kernels if hasattr(e, "cuda_time_total"))
            out["step_us_per_kernel"] = out["step_us"] / max(1, len(kernels))
        except Exception as e:  # the profiler is optional: the step's time stands without it
            out["kernels_error"] = repr(e)[:200]
    with autocast:  # gradients for AdamW to step on (step() clears its own)
        loss = model(tok, tgt)
    loss.backward()
    tensors = sum(1 for _ in model.parameters())
    for foreach in (True, False):
        o = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach)
        out["adamw_foreach" if foreach else "adamw_per_tensor"] = {
            "tensors": tensors, "step_us": timed_us(o.step, device, reps, 1)}
    return out


def dtensor_figures(device, reps, n):
    try:
        try:
            from torch.distributed.tensor import Replicate, distribute_tensor
            from torch.distributed.device_mesh import init_device_mesh
        except ImportError:
            from torch.distributed._tensor import Replicate, distribute_tensor
            from torch.distributed._tensor.device_mesh import init_device_mesh
    except ImportError as e:
        return {"skipped": f"this torch has no DTensor ({e.__class__.__name__})"}
    try:
        with one_rank_group(device, "29517"):
            mesh = init_device_mesh(device.type, (1,))
            x = distribute_tensor(torch.zeros(1, device=device), mesh, [Replicate()])

            def chain():
                for _ in range(n):
                    x.add_(1.0)

            res = {"op_us": timed_us(chain, device, reps, n)}
            res["fsdp2"] = fsdp2_layer_host(device, reps)
            return res
    except Exception as e:
        return {"skipped": repr(e)[:200]}


def fsdp2_layer_host(device, reps):
    """The tiny model's per-layer host time with each block under FSDP2's fully_shard (one rank:
    its hooks, copies and gathers as a sharded run makes them, on a group of one)."""
    try:
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:
            from torch.distributed._composable.fsdp import fully_shard
    except ImportError as e:
        return {"skipped": f"this torch has no fully_shard ({e.__class__.__name__})"}

    def make(layers):
        torch.manual_seed(0)
        sh = dict(SHAPES["tiny"])
        B = sh.pop("B")
        model = Llama(layers, **sh).to(device)
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
        tok = torch.randint(0, sh["vocab"], (B, sh["T"]), device=device)
        return (lambda: model(tok, tok)), (lambda: model(tok, tok).backward())

    try:
        return per_layer_host(device, reps, make)
    except Exception as e:
        return {"skipped": repr(e)[:200]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--quick", action="store_true", help="fewer repeats and the tiny model (the CPU test)")
    ap.add_argument("--layers-only", action="store_true", help=argparse.SUPPRESS)  # the blocking re-run
    args = ap.parse_args()
    device = torch.device(args.device)
    reps, n = (3, 200) if args.quick else (9, 2000)
    torch.set_num_threads(1)  # the host's dispatch, not its threads: tiny tensors, one core

    res = {"command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]), "torch": torch.__version__,
           "python": platform.python_version(), "device": args.device, "host_cpu": platform.processor() or platform.machine()}
    try:
        with open("/proc/cpuinfo") as f:
            res["host_cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if device.type == "cuda":
        res["gpu"] = torch.cuda.get_device_name(device)
    t = torch.zeros(1, device=device)
    g = torch.ones(1, device=device, requires_grad=True)

    def adds():
        for _ in range(n):
            t.add_(1.0)

    def muls():
        y = g
        for _ in range(n):
            y = y * 1.0001
        return y

    def synced():
        for _ in range(n):
            t.add_(1.0)
            sync(device)

    res["op_async_us"] = timed_us(adds, device, reps, n)
    res["op_autograd_us"] = timed_us(muls, device, reps, n)
    res["op_sync_us"] = timed_us(synced, device, reps, n)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    res["precision"] = "bf16 autocast" if dtype == torch.bfloat16 else "fp32"
    res["eager_host"] = layer_host(device, reps, dtype)
    if args.layers_only:
        return finish(res, args.json)
    if device.type == "cuda":  # the same under CUDA_LAUNCH_BLOCKING=1, which must be set before CUDA starts
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "blocking.json")
            env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--device", args.device, "--layers-only",
                                "--json", out] + (["--quick"] if args.quick else []), env=env, capture_output=True,
                               text=True)
            if r.returncode == 0:
                with open(out) as f:
                    b = json.load(f)["eager_host"]
                res["eager_host"].update({"blocking_" + k: v for k, v in b.items() if k.startswith("layer_")})
            else:
                res["eager_host"]["blocking_error"] = (r.stderr or r.stdout)[-300:]
    finish(res, args.json)  # each section written as it ends: a run stopped by its budget keeps what it measured
    shape = "tiny" if args.quick else "seed001"
    res["step"] = step_figures(device, 8, reps, dtype, shape)
    res["step_4_layers"] = step_figures(device, 4, reps, dtype, shape)
    finish(res, args.json)
    res["dtensor"] = dtensor_figures(device, reps, n)
    finish(res, args.json)
    res["tp_plan"] = tp_plan_figures(device, reps)

    s, s4 = res["step"], res["step_4_layers"]
    h = res["eager_host"]
    print(f"eager_op_cost: {res['device']} ({res.get('gpu', res['host_cpu'])}), torch {res['torch']}")
    print(f"  per operator: async {res['op_async_us']:.2f} us, autograd {res['op_autograd_us']:.2f} us, "
          f"synchronised {res['op_sync_us']:.2f} us")
    line = f"  per layer (tiny model): forward {h['layer_forward_us']:.1f} us, backward {h['layer_backward_us']:.1f} us"
    if "blocking_layer_forward_us" in h:
        line += (f"; CUDA_LAUNCH_BLOCKING=1: forward {h['blocking_layer_forward_us']:.1f} us, "
                 f"backward {h['blocking_layer_backward_us']:.1f} us")
    print(line)
    line = f"  8-layer {s['shape']} step: {s['step_us']:.0f} us"
    if "aten_ops" in s:
        line += f", {s['aten_ops']} aten ops ({s4['aten_ops']} at 4 layers), {s['step_us_per_op']:.2f} us per op"
    if "kernels" in s:
        line += f", {s['kernels']} kernels, {s['step_us_per_kernel']:.2f} us per kernel"
    print(line)
    print(f"  AdamW over {s['adamw_foreach']['tensors']} tensors: foreach {s['adamw_foreach']['step_us']:.0f} us, "
          f"per tensor {s['adamw_per_tensor']['step_us']:.0f} us")
    d = res["dtensor"]
    print(f"  DTensor add: {d['op_us']:.2f} us per op" if "op_us" in d else f"  DTensor: {d['skipped']}")
    f = d.get("fsdp2", {})
    if "layer_forward_us" in f:
        print(f"  FSDP2 per layer (tiny model): forward {f['layer_forward_us']:.1f} us, backward {f['layer_backward_us']:.1f} us")
    elif f:
        print(f"  FSDP2: {f['skipped']}")
    for name, fig in res["tp_plan"].items():
        if "layer_forward_us" not in fig:
            print(f"  {name}: {fig['skipped']}")
            continue
        line = (f"  {name} (tiny model): a layer forward {fig['layer_forward_us']:.1f} us, backward "
                f"{fig['layer_backward_us']:.1f} us; the top forward {fig['top_forward_us']:.1f} us, backward "
                f"{fig['top_backward_us']:.1f} us")
        print(line + (f"; AdamW's step {fig['optimizer_us']:.1f} us" if "optimizer_us" in fig
                      else f"; the step: {fig.get('step_error', 'not timed')}"))
    return finish(res, args.json)


def layer_host(device, reps, dtype):
    """Host time of one layer, forward and backward: the tiny model (host-bound on any device) at
    2, 4, 6 and 8 layers, each time its fastest repeat, and the least-squares slope over the layer
    count; the intercept is the model's top (embedding, final norm, head and loss)."""
    reps = max(reps, 9)
    counts = (2, 4, 6, 8)
    runs = {n: step_figures(device, n, reps, dtype, "tiny", layers_only=True, pick=min) for n in counts}

    def fit(ys):  # least squares over the layer counts: (slope, intercept)
        mx, my = statistics.mean(counts), statistics.mean(ys)
        k = sum((x - mx) * (y - my) for x, y in zip(counts, ys)) / sum((x - mx) ** 2 for x in counts)
        return k, my - k * mx

    fwd, top_fwd = fit([runs[n]["forward_us"] for n in counts])
    bwd, top_bwd = fit([runs[n]["forward_backward_us"] - runs[n]["forward_us"] for n in counts])
    return {"model": "tiny", "layer_forward_us": fwd, "layer_backward_us": bwd,
            "top_forward_us": top_fwd, "top_backward_us": top_bwd,
            "by_layers": {str(n): {"forward_us": runs[n]["forward_us"], "forward_backward_us": runs[n]["forward_backward_us"]}
                          for n in counts}}


def finish(res, path):
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
