"""Where a PyTorch eager training step's time goes, in kformer's kernel families (issue 35): the
other side of kformer's output.kernel_times, so that a GPU session sets the two steps side by side
family by family (scripts/gpu_perf_summary.py) and sees where eager is faster, not only that it is.

    families = profile_families(step, device, steps=3)

`step` runs one training step (forward, backward, clipping, optimizer). torch.profiler records
`steps` calls of it. On a GPU each kernel's (and each device copy's or fill's) duration counts for
the operator that launched it; on the CPU, where eager's operators are the work, each operator's
own CPU time counts. Either is put in a family by the operators around it:

1. a region that names the work: the model's own labels (torch_gpt.py's kformer.attention,
   kformer.loss; the step's kformer.clip) and the optimizer's (Optimizer.step#..., zero_grad#...);
2. else the nearest operator, innermost first, that names one (layer_norm: norm, addmm: gemm, ...);
3. else a generic operator (add: residual, copy_ or fill_: copy, to: convert);
4. else "other".
A backward operator is classified as the forward operator that recorded its autograd node (the
same sequence number on the forward thread), so the backward of a labelled region (attention
written as matmuls where torch has no SDPA) counts for that region. Returns ms per step by family,
the total, the step's wall time while profiled (the profiler's own cost included: compare families,
not this, against kformer's fenced step) and the longest kernels or operators (by name and family:
one name may serve two families, as a matmul does).
"""
import re
from collections import defaultdict

import torch

REGIONS = [  # user annotations: the whole region is the family
    (re.compile(r"^kformer\.attention$"), "attention"),
    (re.compile(r"^kformer\.loss$"), "cross_entropy"),
    (re.compile(r"^kformer\.clip$"), "reduction"),
    (re.compile(r"^Optimizer\.step#"), "optimizer"),
    (re.compile(r"^Optimizer\.zero_grad#"), "copy"),
]
OPS = [  # operators (forward or autograd node) that name their family
    (re.compile(r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention|fused_attention"
                r"|ScaledDotProduct", re.I), "attention"),
    (re.compile(r"layer_norm|rms_norm", re.I), "norm"),
    (re.compile(r"cross_entropy|log_softmax|nll_loss|LogSoftmax|NllLoss", re.I), "cross_entropy"),
    (re.compile(r"embedding|aten::index$|aten::index_put|IndexBackward", re.I), "embedding"),
    # a gradient added into one already there: with zero_grad(set_to_none) only the tied embedding's
    # (the head's and the lookup's), which kformer's embedding backward adds in place
    (re.compile(r"AccumulateGrad"), "embedding"),
    (re.compile(r"gelu|silu|swiglu", re.I), "activation"),
    (re.compile(r"adam", re.I), "optimizer"),
    (re.compile(r"_foreach_norm|linalg_vector_norm|aten::norm$"), "reduction"),
    (re.compile(r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear)$|^(Mm|Addmm|Bmm|Baddbmm)Backward"), "gemm"),
    (re.compile(r"^aten::(_to_copy|to)$|ToCopyBackward"), "convert"),
]
GENERIC = [  # operators that do many jobs: only where nothing around them names one
    (re.compile(r"^aten::(add|add_)$|^AddBackward"), "residual"),
    (re.compile(r"^aten::(copy_|fill_|zero_|zeros|zeros_like|empty_like|clone)$"), "copy"),
]
NODE = re.compile(r"^autograd::engine::evaluate_function: |Backward\d*$")


def _first(rules, names):
    for name in names:
        for rx, family in rules:
            if rx.search(name):
                return family
    return None


def _chain(evt):
    """evt's name and its CPU ancestors', innermost first."""
    names = []
    while evt is not None:
        names.append(evt.name)
        evt = evt.cpu_parent
    return names


class Classifier:
    """A family for a CPU operator event from the events around it (module docstring)."""

    def __init__(self, events):
        self.forward = {}  # (forward thread, sequence number) -> the forward op that recorded the node
        self.any_thread = {}  # sequence number -> the first such op on any thread
        for e in events:
            seq = getattr(e, "sequence_nr", -1)
            if seq is not None and seq >= 0 and not NODE.search(e.name):
                self.forward.setdefault((e.thread, seq), e)
                self.any_thread.setdefault(seq, e)

    def forward_of(self, evt):
        """The forward op whose autograd node `evt` (or an ancestor) runs, else None."""
        while evt is not None:
            if NODE.search(evt.name) and getattr(evt, "sequence_nr", -1) >= 0:
                fwd = self.forward.get((getattr(evt, "fwd_thread", None), evt.sequence_nr))
                return fwd if fwd is not None else self.any_thread.get(evt.sequence_nr)  # no forward thread recorded
            evt = evt.cpu_parent
        return None

    def family(self, evt):
        names = _chain(evt)
        fwd = self.forward_of(evt)
        fwd_names = _chain(fwd) if fwd is not None else []
        for found in (_first(REGIONS, names), _first(REGIONS, fwd_names), _first(OPS, names), _first(OPS, fwd_names),
                      _first(GENERIC, names), _first(GENERIC, fwd_names)):
            if found:
                return found
        return "other"


def profile_families(step, device, steps=3, top=12):
    """ms per step by family of `steps` calls of step() under torch.profiler (module docstring)."""
    import time
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    if device == "cuda":
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - start) * 1e3 / steps
    events = [e for e in prof.events() if str(e.device_type).endswith("CPU")]
    classify = Classifier(events)
    by_family, by_name, calls = defaultdict(float), defaultdict(float), defaultdict(int)  # by (name, family)
    for e in events:
        if device == "cuda":
            work = [(k.name, k.duration) for k in getattr(e, "kernels", [])]
        else:
            work = [(e.name, e.self_cpu_time_total)] if e.self_cpu_time_total > 0 else []
        if not work:
            continue
        fam = classify.family(e)
        for name, us in work:
            by_family[fam] += us / 1e3 / steps
            by_name[name, fam] += us / 1e3 / steps
            calls[name, fam] += 1
    longest = sorted(by_name.items(), key=lambda x: -x[1])[:top]
    return {
        "source": "torch.profiler: " + ("device kernels and copies" if device == "cuda" else "operators' own CPU time"),
        "steps": steps,
        "by_family_ms": dict(sorted(by_family.items(), key=lambda x: -x[1])),
        "total_ms": sum(by_family.values()),
        "step_ms_profiled": wall_ms,
        "longest": [{"name": n[:160], "family": f, "ms": ms, "calls_per_step": calls[n, f] / steps}
                    for (n, f), ms in longest],
    }
