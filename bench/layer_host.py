"""Host-time measurement that bench/eager_op_cost.py and bench/tp_plan_host.py share: a timer of
repeated calls (device-synchronised around each), one layer's host time as the difference of a model
at 8 and at 4 layers, and a process group of one rank for the measurements that need one (DTensor,
FSDP, TP plans)."""
import contextlib
import gc
import os
import statistics
import time

import torch


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed_us(fn, device, reps, inner, pick=statistics.median):
    """One call of fn (which runs `inner` operators) timed `reps` times, per operator, in us: the
    median, or with pick=min the fastest (the host's own cost, which other processes only add to)."""
    fn()
    sync(device)
    times = []
    gc.collect()
    gc.disable()  # a collection lands in one repeat or another: timed apart from the operators
    try:
        for _ in range(reps):
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            times.append((time.perf_counter() - t0) * 1e6 / inner)
    finally:
        gc.enable()
    return pick(times)


def per_layer_host(device, reps, make):
    """Host time of one layer, forward and backward, and of what the model runs beside its layers:
    make(layers) builds the model at that many layers and returns its (forward, forward_and_backward)
    calls, and optionally a third, the whole step (forward, backward, the optimizer's step and its
    zero_grad). Each is timed at 8 and 4 layers (the fastest repeats); a layer is the difference over
    the 4 layers between, the model's top (embedding, final norm, head, loss) what is left at 4
    layers, and the optimizer the step less its forward and backward at 8 layers. The raw times are
    returned too (times_us), so that a figure can be derived again from the run's own output."""
    times, step_error = {}, None
    for layers in (8, 4):
        calls = make(layers)
        times[layers] = [timed_us(c, device, max(reps, 9), 1, min) for c in calls[:2]]
        if len(calls) > 2 and step_error is None:
            try:  # the step's failure (an optimizer the wrapper refuses) leaves the layer's figures standing
                times[layers].append(timed_us(calls[2], device, max(reps, 9), 1, min))
            except Exception as e:
                step_error = repr(e)[:200]
    (f8, fb8, *s8), (f4, fb4, *_) = times[8], times[4]
    out = {"layer_forward_us": (f8 - f4) / 4, "layer_backward_us": ((fb8 - f8) - (fb4 - f4)) / 4}
    out["top_forward_us"] = f4 - 4 * out["layer_forward_us"]
    out["top_backward_us"] = (fb4 - f4) - 4 * out["layer_backward_us"]
    if s8 and step_error is None:
        out["optimizer_us"] = s8[0] - fb8
    elif step_error:
        out["step_error"] = step_error
    names = ("forward", "forward_backward", "step")
    out["times_us"] = {str(n): dict(zip(names, t)) for n, t in times.items()}
    return out


@contextlib.contextmanager
def one_rank_group(device, port):
    """A process group of this one rank (NCCL on a GPU, gloo on a CPU) unless one is up already,
    destroyed on leaving if it was made here."""
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", port)
    started = False
    try:
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=0, world_size=1)
            started = True
        yield
    finally:
        if started:
            dist.destroy_process_group()
