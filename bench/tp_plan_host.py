"""The host's time per transformer layer of a Llama under PyTorch's tensor-parallel plan, as ezpz's
FSDP+TP example runs it (issue 37, item 5; seed note 001). Used by bench/eager_op_cost.py.

ezpz's `src/ezpz/examples/fsdp_tp.py` (saforem2/ezpz 2852d93, 2025-11-18) applies its plan with
`parallelize_module` on the `tp` dimension of a (dp, tp) mesh at every TP, one rank included: each
linear's weight a DTensor (Colwise/Rowwise), each norm a SequenceParallel module, each attention
and MLP input passed through PrepareModuleInput; then FSDP1 over `dp` with bf16 parameters. Its
seconds are the host's issue time (docs/predict.md, "seed note 001"), so the figure its rows need is
this layer's host time. Measured here on one rank, a mesh of (1, 1): the same plan and hooks on
every operator, no transfer. The model is written here (torchtitan's module names, which the plan
addresses), not ezpz's.

  plain           the same layer with no plan: the eager host time it adds to
  tp_plan         with the plan (DTensor dispatch on each planned module)
  tp_plan_fsdp1   with the plan and FSDP1 around the model, as ezpz runs it

Each: forward and backward host time of one layer, the difference of 8 and 4 layers over 4 (the
fastest repeats); the model's top (embedding, final norm, head and loss: what is left at 4 layers)
forward and backward; AdamW's step and zero_grad (the whole step less its forward and backward); the
raw times they come from; or the reason it was skipped (a torch without the plan's API, or FSDP1 on
a CPU).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from layer_host import one_rank_group, per_layer_host

# A tiny Llama: host-bound on any device, as bench/eager_op_cost.py's "tiny" shape.
D, HEADS, KV_HEADS, FFN, VOCAB, T, B = 32, 4, 2, 64, 256, 16, 1


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):  # x (B,T,C); widened for the statistics, as the eager module does
        return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * self.weight


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.hd = D // HEADS
        self.wq = nn.Linear(D, HEADS * self.hd, bias=False)
        self.wk = nn.Linear(D, KV_HEADS * self.hd, bias=False)
        self.wv = nn.Linear(D, KV_HEADS * self.hd, bias=False)
        self.wo = nn.Linear(HEADS * self.hd, D, bias=False)

    def forward(self, x, cos, sin):  # x (B,T,C); heads as -1: the plan's local share of them
        b, t, _ = x.shape

        def rot(y):  # (B,T,H,hd), rotate-half convention, in y's type (bf16 under FSDP1's mixed precision)
            y1, y2 = y.chunk(2, dim=-1)
            return (y * cos + torch.cat((-y2, y1), dim=-1) * sin).type_as(y)

        q = rot(self.wq(x).view(b, t, -1, self.hd)).transpose(1, 2)
        k = rot(self.wk(x).view(b, t, -1, self.hd)).transpose(1, 2)
        v = self.wv(x).view(b, t, -1, self.hd).transpose(1, 2)
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0
            s = (q @ k.transpose(-1, -2)) / self.hd ** 0.5
            y = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf")).softmax(-1) @ v
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(D, FFN, bias=False)
        self.w2 = nn.Linear(FFN, D, bias=False)
        self.w3 = nn.Linear(D, FFN, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm, self.attention = RMSNorm(D), Attention()
        self.ffn_norm, self.feed_forward = RMSNorm(D), FeedForward()

    def forward(self, x, cos, sin):
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList(Block() for _ in range(layers))
        self.norm, self.output = RMSNorm(D), nn.Linear(D, VOCAB, bias=False)
        hd = D // HEADS
        ang = torch.outer(torch.arange(T).float(), 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd)))
        self.register_buffer("cos", torch.cat((ang, ang), -1).cos()[None, :, None, :], persistent=False)
        self.register_buffer("sin", torch.cat((ang, ang), -1).sin()[None, :, None, :], persistent=False)

    def forward(self, tokens):  # (B,T) -> fp32 logits (B,T,V)
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.cos, self.sin)
        return self.output(self.norm(h)).float()


def apply_plan(model, tp_mesh):
    """ezpz's plan (fsdp_tp.py `parallelize`), module for module, on `tp_mesh`."""
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)
    try:
        from torch.distributed.tensor import Replicate, Shard
    except ImportError:
        from torch.distributed._tensor import Replicate, Shard
    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })
    for block in model.layers:
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1), None, None),
                                            desired_input_layouts=(Replicate(), None, None)),
            "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
        })
    return model


def per_layer(device, reps, build):
    """Host time of one layer, forward and backward, of the model's top and of AdamW's step
    (layer_host.per_layer_host) of the Llama above, made by `build` from the plain model. The step
    is ezpz's (fsdp_tp.py's loop between its t0 and t2): the forward, the loss over the whole fp32
    logits, the backward, AdamW's step (foreach, over the wrapped model's parameters) and zero_grad."""
    def make(layers):
        torch.manual_seed(0)
        model = build(Llama(layers).to(device))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        tok = torch.randint(0, VOCAB, (B, T), device=device)

        def loss():
            return F.cross_entropy(model(tok).reshape(-1, VOCAB), tok.reshape(-1))

        def step():
            loss().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return (lambda: model(tok)), (lambda: loss().backward()), step

    return per_layer_host(device, reps, make)


def guarded(f):
    try:
        return f()
    except ImportError as e:
        return {"skipped": f"this torch lacks the plan's API ({e})"[:200]}
    except Exception as e:  # recorded, never fatal: the other figures stand
        return {"skipped": repr(e)[:200]}


def tp_plan_figures(device, reps):
    out = {"plain": guarded(lambda: per_layer(device, reps, lambda m: m))}

    def skipped(e):
        return {"skipped": f"no one-rank device mesh here ({e.__class__.__name__}: {e})"[:200]}

    try:
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError as e:
        out["tp_plan"] = out["tp_plan_fsdp1"] = skipped(e)
        return out

    def fsdp1(m, mesh):
        from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision
        if device.type != "cuda":
            raise RuntimeError("FSDP1 with mixed precision is measured on a GPU only")
        return FullyShardedDataParallel(m, device_mesh=mesh["dp"], mixed_precision=MixedPrecision(
            param_dtype=torch.bfloat16, cast_forward_inputs=True, reduce_dtype=torch.float32))

    try:
        with one_rank_group(device, "29518"):
            mesh = init_device_mesh(device.type, (1, 1), mesh_dim_names=("dp", "tp"))
            out["tp_plan"] = guarded(lambda: per_layer(device, reps, lambda m: apply_plan(m, mesh["tp"])))
            out["tp_plan_fsdp1"] = guarded(lambda: per_layer(device, reps,
                                                             lambda m: fsdp1(apply_plan(m, mesh["tp"]), mesh)))
    except Exception as e:  # the group or the mesh would not start
        out.setdefault("tp_plan", skipped(e))
        out.setdefault("tp_plan_fsdp1", skipped(e))
    return out
