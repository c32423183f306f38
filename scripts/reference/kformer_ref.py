#!/usr/bin/python3
"""An independent PyTorch implementation of what kformer trains, for the `reference` tests.

It rebuilds kformer's model from the deck alone: the same counter-based initialisation (keyed by
seed, parameter name and global element index), the same synthetic data by global sample index,
the same GPT / Llama blocks, AdamW (betas 0.9/0.95, eps 1e-8, decoupled decay on matrices),
global-norm clipping and warm-up + cosine schedule, all in float64. Given kformer's JSON report,
it checks every iteration's loss and gradient norm.

With train.precision=bf16 in the report it mirrors kformer's mixed precision by explicit roundings
to bf16 in the float64 graph, at the points where kformer stores bf16: the weight copies the GEMMs
read, the activations kept for backward (norm outputs, qkv, attention output and naive
attention's probabilities, the MLP's input and activation) and the gradients that feed a GEMM or
attention (rounded on their way back). The residual stream, norms, softmax statistics and the
loss stay unrounded, the masters and AdamW float64 as in fp32 mode.

    kformer_ref.py REPORT.json [--rtol 1e-4]     exit 0 when every iteration matches
    kformer_ref.py REPORT.json --export FILE     also: from the weights and batch kformer exported
                                                 (output.export), the loss and every gradient to 1e-5
"""
import argparse
import json
import math
import sys

import numpy as np
import torch

M64 = (1 << 64) - 1


def mix64(z):
    z = np.uint64(z) if not isinstance(z, np.ndarray) else z.astype(np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def counter_hash(key, counter):
    with np.errstate(over="ignore"):
        return mix64(np.uint64(key) ^ mix64(np.asarray(counter, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)))


def counter_normal(key, idx):
    idx = np.asarray(idx, dtype=np.uint64)
    u1 = ((counter_hash(key, 2 * idx) >> np.uint64(11)).astype(np.float64) + 0.5) / 9007199254740992.0
    u2 = ((counter_hash(key, 2 * idx + 1) >> np.uint64(11)).astype(np.float64) + 0.5) / 9007199254740992.0
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)


def stream_key(seed, name):
    h = 1469598103934665603
    for c in name.encode():
        h = ((h ^ c) * 1099511628211) & M64
    return int(mix64(np.uint64(h) ^ mix64(np.uint64(seed))))


class Shape:
    def __init__(self, cfg):
        m = cfg["model"]
        self.gpt = m["family"] == "gpt"
        self.L, self.C, self.H = m["n_layers"], m["d_model"], m["n_heads"]
        self.KV = m["n_kv_heads"] or self.H
        self.hd = self.C // self.H
        self.F, self.V, self.maxT = m["ffn_dim"], m["vocab_size"], m["max_seq_len"]


def param_specs(s):
    """(name, rows, cols, init, std, decay) in kformer's order (model_spec.cpp)."""
    C, Q, KV, F = s.C, s.H * s.hd, s.KV * s.hd, s.F
    std0, std_out = 0.02, 0.02 / math.sqrt(2.0 * s.L)
    p = [("embed.tokens.weight", s.V, C, "normal", std0, True)]
    if s.gpt:
        p.append(("embed.positions.weight", s.maxT, C, "normal", 0.01, True))
    for l in range(s.L):
        b = f"layers.{l}."
        if s.gpt:
            p += [(b + "ln1.weight", C, 1, "ones", 0, False), (b + "ln1.bias", C, 1, "zeros", 0, False)]
        else:
            p.append((b + "attn_norm.weight", C, 1, "ones", 0, False))
        p += [(b + "attn.wq.weight", Q, C, "normal", std0, True), (b + "attn.wk.weight", KV, C, "normal", std0, True),
              (b + "attn.wv.weight", KV, C, "normal", std0, True)]
        if s.gpt:
            p += [(b + "attn.wq.bias", Q, 1, "zeros", 0, False), (b + "attn.wk.bias", KV, 1, "zeros", 0, False),
                  (b + "attn.wv.bias", KV, 1, "zeros", 0, False)]
        p.append((b + "attn.wo.weight", C, Q, "normal", std_out, True))
        if s.gpt:
            p += [(b + "attn.wo.bias", C, 1, "zeros", 0, False), (b + "ln2.weight", C, 1, "ones", 0, False),
                  (b + "ln2.bias", C, 1, "zeros", 0, False), (b + "mlp.fc.weight", F, C, "normal", std0, True),
                  (b + "mlp.fc.bias", F, 1, "zeros", 0, False), (b + "mlp.proj.weight", C, F, "normal", std_out, True),
                  (b + "mlp.proj.bias", C, 1, "zeros", 0, False)]
        else:
            p += [(b + "mlp_norm.weight", C, 1, "ones", 0, False), (b + "mlp.gate.weight", F, C, "normal", std0, True),
                  (b + "mlp.up.weight", F, C, "normal", std0, True), (b + "mlp.down.weight", C, F, "normal", std_out, True)]
    p.append(("final_norm.weight", C, 1, "ones", 0, False))
    if s.gpt:
        p.append(("final_norm.bias", C, 1, "zeros", 0, False))
    else:
        p.append(("head.weight", s.V, C, "normal", std0, True))
    return p


def init_params(s, seed):
    params = {}
    for name, rows, cols, init, std, decay in param_specs(s):
        if init == "normal":
            v = std * counter_normal(stream_key(seed, name), np.arange(rows * cols, dtype=np.uint64))
            v = v.astype(np.float32).astype(np.float64)  # kformer stores float32
        else:
            v = np.full(rows * cols, 1.0 if init == "ones" else 0.0)
        t = torch.tensor(v.reshape(rows, cols) if cols > 1 else v, dtype=torch.float64, requires_grad=True)
        params[name] = (t, decay)
    return params


def random_tokens(V, seed, first, count, T):
    key = stream_key(seed, "data.random")
    mult = 1 + 2 * int(mix64(np.uint64(key)) % np.uint64(97))
    out = np.zeros((count, T + 1), dtype=np.int64)
    for s in range(count):
        base = (first + s) * (T + 1)
        h = [int(x) for x in counter_hash(key, np.arange(base, base + T + 1, dtype=np.uint64))]
        prev = h[0] % V
        out[s, 0] = prev
        for t in range(1, T + 1):
            prev = (prev * mult + 7) % V if (h[t] & 3) != 0 else (h[t] >> 2) % V
            out[s, t] = prev
    return torch.tensor(out)


def rope(x, T, hd):  # x (B,T,heads,hd), rotate_half convention
    half = hd // 2
    inv = 10000.0 ** (-2.0 * torch.arange(half, dtype=torch.float64) / hd)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    c, s_ = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s_, x2 * c + x1 * s_], dim=-1)


def to_bf16(x):
    return x.to(torch.float32).to(torch.bfloat16).to(x.dtype)


class RoundValue(torch.autograd.Function):
    """A value stored in bf16: rounded forward, the gradient passes unchanged."""

    @staticmethod
    def forward(ctx, x):
        return to_bf16(x)

    @staticmethod
    def backward(ctx, g):
        return g


class RoundGrad(torch.autograd.Function):
    """A gradient kformer rounds to bf16 on its way back (a GEMM's or attention's input)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return to_bf16(g)


class SoftmaxBf16(torch.autograd.Function):
    """Naive attention's probabilities stored in bf16; its backward reads the stored values."""

    @staticmethod
    def forward(ctx, scores):
        p = to_bf16(scores.softmax(-1))
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        return p * (g - (p * g).sum(-1, keepdim=True))


def forward(s, P, tok, bf16=False, naive=True):
    """The loss of one batch; bf16: kformer's mixed precision (see the module's comment), with
    naive or fused attention (they differ in whether the probabilities are stored rounded)."""
    ident = lambda x: x
    R = RoundValue.apply if bf16 else ident  # a stored bf16 activation or weight copy
    G = RoundGrad.apply if bf16 else ident   # a gradient rounded before a GEMM or attention
    w32 = lambda n: P[n][0]
    w = lambda n: R(P[n][0]) if bf16 and P[n][0].dim() == 2 and not n.startswith("embed.") else P[n][0]
    B, T = tok.shape[0], tok.shape[1] - 1
    inp, tgt = tok[:, :T], tok[:, 1:]
    x = w32("embed.tokens.weight")[inp]  # the embedding reads the fp32 masters in both precisions
    if s.gpt:
        x = x + w32("embed.positions.weight")[:T][None]
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (s.C,), w(n + ".weight"), w(n + ".bias"), 1e-5)
    rms = lambda x, n: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w(n + ".weight")
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(s.L):
        b = f"layers.{l}."
        h = R(ln(x, b + "ln1") if s.gpt else rms(x, b + "attn_norm"))
        lin = lambda h, n, bias: h @ w(n + ".weight").T + (w(n + ".bias") if bias else 0)
        # kformer's one QKV GEMM: its output rounded when stored (after RoPE for llama), its
        # gradient rounded by attention's backward (and again by RoPE's, in place in bf16).
        q = G(lin(h, b + "attn.wq", s.gpt)).view(B, T, s.H, s.hd)
        k = G(lin(h, b + "attn.wk", s.gpt)).view(B, T, s.KV, s.hd)
        v = G(lin(h, b + "attn.wv", s.gpt)).view(B, T, s.KV, s.hd)
        if not s.gpt:
            q, k = G(rope(q, T, s.hd)), G(rope(k, T, s.hd))
        q, k, v = R(q), R(k), R(v)
        rep = s.H // s.KV
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        att = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(s.hd)
        att = att.masked_fill(~mask, float("-inf"))
        att = SoftmaxBf16.apply(att) if bf16 and naive else att.softmax(-1)
        o = R(G(torch.einsum("bhts,bshd->bthd", att, v).reshape(B, T, s.H * s.hd)))
        x = x + G(lin(o, b + "attn.wo", s.gpt))
        h = R(ln(x, b + "ln2") if s.gpt else rms(x, b + "mlp_norm"))
        if s.gpt:
            h = R(torch.nn.functional.gelu(R(G(lin(h, b + "mlp.fc", True))), approximate="tanh"))
            x = x + G(lin(h, b + "mlp.proj", True))
        else:
            h = R(torch.nn.functional.silu(R(G(lin(h, b + "mlp.gate", False)))) * R(G(lin(h, b + "mlp.up", False))))
            x = x + G(lin(h, b + "mlp.down", False))
    x = R(ln(x, "final_norm") if s.gpt else rms(x, "final_norm"))
    head = R(w32("embed.tokens.weight")) if s.gpt and bf16 else w("embed.tokens.weight") if s.gpt else w("head.weight")
    logits = G(x @ head.T)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, s.V), tgt.reshape(-1))


def precision_of(cfg):
    """(bf16, naive attention) as the report's config says."""
    return cfg["train"].get("precision", "fp32") == "bf16", cfg["kernels"]["attention"] == "naive"


def read_safetensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        dt = {"F32": np.float32, "I32": np.int32}[t["dtype"]]
        out[name] = np.frombuffer(data[b:e], dtype=dt).reshape(t["shape"])
    return out


def check_export(cfg, path, loss_reported, rtol=1e-5, grad_rtol=None):
    """Loss (to rtol) and every gradient (to grad_rtol, default rtol) from kformer's own exported
    weights and batch."""
    grad_rtol = grad_rtol or rtol
    s, T = Shape(cfg), read_safetensors(path)
    P = {n: (torch.tensor(T[n].astype(np.float64), requires_grad=True), d) for n, _, _, _, _, d in param_specs(s)}
    tok = torch.tensor(T["tokens"].astype(np.int64))
    loss = forward(s, P, tok, *precision_of(cfg))
    loss.backward()
    total = math.sqrt(sum(float((p.grad ** 2).sum()) for p, _ in P.values()))
    worst, bad = 0.0, 0
    for name, (p, _) in P.items():
        got, ref = torch.tensor(T["grad." + name].astype(np.float64)), p.grad
        # Relative to the tensor's own size, or to a small share of the whole gradient for tensors
        # whose exact gradient is ~0 (a key bias, for instance: softmax ignores it).
        err = float((got - ref).norm()) / max(float(ref.norm()), 1e-3 * total)
        worst = max(worst, err)
        if err > grad_rtol:
            bad += 1
            print(f"gradient of {name}: relative error {err:.2e} > {grad_rtol}")
    lrel = abs(loss.item() - loss_reported) / abs(loss.item())
    print(f"export: loss kformer {loss_reported:.9f} torch {loss.item():.9f} (rel {lrel:.1e}); "
          f"{len(P)} gradients, worst relative error {worst:.1e} (tolerance {grad_rtol:g})")
    return bad + (lrel > rtol)


def lr_at(it, cfg):
    t = cfg["train"]
    lr, warm, steps = t["lr"], t["warmup"], t["steps"]
    if warm > 0 and it <= warm:
        return lr * it / warm
    progress = (it - warm) / max(1, steps - warm)
    return lr / 10 + 0.5 * (lr - lr / 10) * (1 + math.cos(math.pi * min(1.0, progress)))


def train(cfg, iterations, start=None):
    """Losses and gradient norms of `iterations` iterations. start: None (from initialisation at
    iteration 1), or (P, moments, last_iteration, consumed_samples) from a checkpoint, where
    moments maps a name to (exp_avg, exp_avg_sq) as numpy arrays."""
    s, t = Shape(cfg), cfg["train"]
    P = init_params(s, t["seed"]) if start is None else start[0]
    decay = [p for p, d in P.values() if d]
    nodecay = [p for p, d in P.values() if not d]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": t["weight_decay"]},
                             {"params": nodecay, "weight_decay": 0.0}], lr=t["lr"], betas=(0.9, 0.95), eps=1e-8)
    GB, T = t["global_batch"], t["seq_len"]
    first, sample = 1, 0
    if start is not None:
        _, moments, last, sample = start
        first = last + 1
        for name, (p, _) in P.items():
            m, v = moments[name]
            opt.state[p] = {"step": torch.tensor(float(last)), "exp_avg": torch.tensor(m.astype(np.float64)),
                            "exp_avg_sq": torch.tensor(v.astype(np.float64))}
    out = []
    for it in range(first, first + iterations):
        tok = random_tokens(s.V, t["seed"], sample + (it - first) * GB, GB, T)
        opt.zero_grad()
        loss = forward(s, P, tok, *precision_of(cfg))
        loss.backward()
        params = [p for p, _ in P.values()]
        norm = torch.sqrt(sum((p.grad ** 2).sum() for p in params)).item()
        if t["grad_clip"] > 0:
            scale = min(1.0, t["grad_clip"] / (norm + 1e-6))
            for p in params:
                p.grad.mul_(scale)
        for g in opt.param_groups:
            g["lr"] = lr_at(it, cfg)
        opt.step()
        out.append((loss.item(), norm))
    return out


def compare(records, ref, rtol):
    """Prints kformer's iterations beside the reference's (loss, norm) pairs; returns the mismatches
    (loss beyond rtol, gradient norm beyond 10 rtol)."""
    bad = 0
    print(f"{'iter':>5} {'kformer loss':>14} {'torch loss':>14} {'rel':>9} {'kformer norm':>13} {'torch norm':>11}")
    for rec, (loss, norm) in zip(records, ref):
        rel = abs(rec["loss"] - loss) / abs(loss)
        reln = abs(rec["grad_norm"] - norm) / max(abs(norm), 1e-12)
        flag = "" if rel <= rtol and reln <= 10 * rtol else "  <-- MISMATCH"
        bad += bool(flag)
        print(f"{rec['iteration']:5d} {rec['loss']:14.8f} {loss:14.8f} {rel:9.2e} {rec['grad_norm']:13.6f} {norm:11.6f}{flag}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--export", help="safetensors file written by output.export")
    ap.add_argument("--export-rtol", type=float, help="tolerance of the loss from the export (default: --rtol)")
    ap.add_argument("--grad-rtol", type=float, help="tolerance of the exported gradients (default: the export's)")
    a = ap.parse_args()
    rep = json.load(open(a.report))
    cfg = rep["config"]
    if cfg["data"]["source"] != "random":
        sys.exit("kformer_ref.py: only data.source=random is reimplemented here")
    its = rep["iterations"]
    bad = check_export(cfg, a.export, its[0]["loss"], a.export_rtol or a.rtol, a.grad_rtol) if a.export else 0
    bad += compare(its, train(cfg, len(its)), a.rtol)
    print("reference: " + ("all iterations match" if bad == 0 else f"{bad} iteration(s) differ") + f" (rtol {a.rtol})")
    return 1 if bad else 0


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    sys.exit(main())
