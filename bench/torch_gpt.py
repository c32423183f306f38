"""kformer's GPT model as a PyTorch user would write it for speed, for timing against kformer.

scripts/reference/kformer_ref.py is the float64 reference of the same model: explicit masks, one
tensor per kformer parameter, roundings mirrored. This one computes the same function with what
PyTorch offers to make it fast: one fused QKV linear, scaled_dot_product_attention (causal; GQA by
repeating K and V), the embedding tied to the output head, fused AdamW on CUDA. Its parameters
come from kformer_ref (kformer's own initial values, for a loss check at small shapes) or from
torch's generator with the same standard deviations (fast, for the GPT-2 124M shape).

    model = TorchGPT(kformer_ref.Shape(cfg), params)      params: name -> float32 tensor
    loss = model(tokens)                                  tokens (B, T+1) int64
"""
import contextlib
import math

import torch
import torch.nn.functional as F

import kformer_ref


def sdpa_math(q, k, v, is_causal=True):
    """scaled_dot_product_attention's result where torch lacks it (torch < 2.0): q, k, v
    (B, heads, T, hd), the same call so that the caller's layout code is the same."""
    T = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if is_causal:
        att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    return att.softmax(-1) @ v


def attention_impl():
    """(function, name): torch's scaled_dot_product_attention, else the explicit fallback."""
    f = getattr(F, "scaled_dot_product_attention", None)
    return (f, "sdpa") if f is not None else (sdpa_math, f"math (torch {torch.__version__} has no sdpa)")


def causal_attention(qkv, H, KV, hd, attend):
    """qkv (B, T, (H + 2 KV) hd), kformer's packed layout -> (B, T, H hd)."""
    B, T, _ = qkv.shape
    q, k, v = qkv.split([H * hd, KV * hd, KV * hd], dim=-1)
    q = q.view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
    k = k.view(B, T, KV, hd).transpose(1, 2)
    v = v.view(B, T, KV, hd).transpose(1, 2)
    if KV != H:  # GQA: each KV head serves H / KV query heads
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
    return attend(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, H * hd)


def region(name, on):
    """A profiler region called `name` where `on` (bench/torch_families.py reads them), else nothing."""
    return torch.profiler.record_function(name) if on else contextlib.nullcontext()


def kformer_params(s, seed):
    """kformer's initial parameters (counter-based, exact): numpy, so only for small shapes."""
    return {n: p.detach().float() for n, (p, _) in kformer_ref.init_params(s, seed).items()}


def random_params(s, seed, device):
    """Parameters of kformer's shapes and standard deviations from torch's generator."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    out = {}
    for name, rows, cols, init, std, _ in kformer_ref.param_specs(s):
        shape = (rows, cols) if cols > 1 else (rows,)
        if init == "normal":
            out[name] = torch.randn(shape, generator=g, device=device) * std
        else:
            out[name] = torch.full(shape, 1.0 if init == "ones" else 0.0, device=device)
    return out


class TorchGPT(torch.nn.Module):
    def __init__(self, s, params):
        super().__init__()
        if not s.gpt:
            raise ValueError("torch_gpt.py builds the gpt family only: use model.family=gpt")
        self.s = s
        P = lambda n: torch.nn.Parameter(params[n].detach().clone().float().contiguous())
        self.wte, self.wpe = P("embed.tokens.weight"), P("embed.positions.weight")  # (V, C), (maxT, C)
        self.layers = torch.nn.ModuleList()
        for l in range(s.L):
            b = f"layers.{l}."
            m = torch.nn.Module()
            for ours, theirs in (("ln1_w", "ln1.weight"), ("ln1_b", "ln1.bias"), ("wo", "attn.wo.weight"),
                                 ("bo", "attn.wo.bias"), ("ln2_w", "ln2.weight"), ("ln2_b", "ln2.bias"),
                                 ("fc", "mlp.fc.weight"), ("bfc", "mlp.fc.bias"), ("proj", "mlp.proj.weight"),
                                 ("bproj", "mlp.proj.bias")):
                setattr(m, ours, P(b + theirs))
            # kformer's three projections as one (H + 2 KV) hd x C matrix: one GEMM, as kformer does.
            m.wqkv = torch.nn.Parameter(torch.cat([params[b + f"attn.w{x}.weight"] for x in "qkv"]).float())
            m.bqkv = torch.nn.Parameter(torch.cat([params[b + f"attn.w{x}.bias"] for x in "qkv"]).float())
            self.layers.append(m)
        self.lnf_w, self.lnf_b = P("final_norm.weight"), P("final_norm.bias")
        self.attend, self.attention = attention_impl()
        self.track_logits, self.logit_absmax = False, None
        self.labels = False  # name the attention and the loss for the profiler (bench/torch_families.py)

    def forward(self, tok):  # tok (B, T+1): inputs and next-token targets
        s = self.s
        T = tok.shape[1] - 1
        inp, tgt = tok[:, :T], tok[:, 1:]
        x = self.wte[inp] + self.wpe[:T][None]  # (B, T, C)
        for m in self.layers:
            h = F.layer_norm(x, (s.C,), m.ln1_w, m.ln1_b, 1e-5)
            qkv = F.linear(h, m.wqkv, m.bqkv)
            with region("kformer.attention", self.labels):
                o = causal_attention(qkv, s.H, s.KV, s.hd, self.attend)
            x = x + F.linear(o, m.wo, m.bo)
            h = F.layer_norm(x, (s.C,), m.ln2_w, m.ln2_b, 1e-5)
            x = x + F.linear(F.gelu(F.linear(h, m.fc, m.bfc), approximate="tanh"), m.proj, m.bproj)
        x = F.layer_norm(x, (s.C,), self.lnf_w, self.lnf_b, 1e-5)
        logits = F.linear(x, self.wte)  # (B, T, V), the tied head
        if self.track_logits:  # the largest |logit|, which bounds the loss's rounding error (small shapes only)
            self.logit_absmax = logits.detach().float().abs().max()
        with region("kformer.loss", self.labels):
            return F.cross_entropy(logits.float().reshape(-1, s.V), tgt.reshape(-1))


def adamw(model, cfg):
    """kformer's AdamW: betas 0.9/0.95, eps 1e-8, decay on the matrices; fused where torch has it."""
    t = cfg["train"]
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() == 2], "weight_decay": t["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    kw = dict(lr=t["lr"], betas=(0.9, 0.95), eps=1e-8)
    if params[0].is_cuda:
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "fused"
        except (TypeError, RuntimeError):
            pass
    return torch.optim.AdamW(groups, **kw), "default"
