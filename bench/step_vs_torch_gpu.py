#!/usr/bin/python3
"""kformer's training step against PyTorch eager and torch.compile on one device (issue 19).

    bench/step_vs_torch_gpu.py --kformer BIN [--device cuda|cpu] [--precision fp32|bf16]
        [--shape gpt2|tiny] [--attention auto|naive|fused|batched_gemm|vendor] [--gemm auto|native|vendor]
        [--steps 10] [--warmup 3] [--rounds 2] [--compile inductor|eager|off] [--budget-s S] [--json OUT]
        [--keep-report DIR]

Shapes: gpt2 is GPT-2 124M (12 layers, d 768, 12 heads, vocab 50304, T 1024, micro-batch 8);
tiny is input/tiny.yaml at one micro-batch of 8 (the CPU test). kformer runs one rank
(comm.backend=self) with --gemm and --attention as kernels.gemm and kernels.attention, by default
auto as the decks have them (kformer times the candidates at start-up and picks; the JSON keeps
its report's summary.kernels_gemm and summary.kernels_attention, what it ran and why); PyTorch
trains bench/torch_gpt.py's model of the same deck (taken from kformer's report) with the same
AdamW, clipping and schedule, in eager mode and through torch.compile, bf16 being autocast over
fp32 masters as kformer's bf16 is. Each round runs kformer, then eager, then compiled, each for
--steps steps; a variant's figure is the median over rounds of its median step after --warmup.
Also measured: torch.matmul's rate at the shape of kformer's GEMM ceiling, in both precisions.
After the rounds, where each side's step goes, in kformer's kernel families: one more kformer run
with output.kernel_times=true (kformer.kernel_times) and three eager steps under torch.profiler
(eager.kernel_families, bench/torch_families.py); --no-kernel-times and --no-torch-families leave
them out.

Prints both step times, torch/kformer (above 1: kformer is faster) and kformer's MFU: its model
FLOP/s over summary.gemm_ceiling_tflops, the best GEMM in the run's precision kformer measures at
start-up (miniapp/measure/ceiling.cpp); the bf16 MFU is also given against torch's bf16 matmul rate
(on a GPU). At small shapes (tiny) torch starts from kformer's exact initial weights
and each step of its first run must match kformer's: the loss and the gradient norm within 1e-6
relative in fp32, in bf16 within what bf16's rounding allows over the steps compared
(bf16_tolerances; exit 1 otherwise): the check that both sides train the same model with the same
optimizer.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts", "reference"))
sys.path.insert(0, HERE)
import torch  # noqa: E402

import kformer_ref  # noqa: E402
import torch_families  # noqa: E402
import torch_gpt  # noqa: E402

SHAPES = {
    "gpt2": ["input/gpt3-small.yaml", "model.vocab_size=50304", "model.max_seq_len=1024", "train.seq_len=1024",
             "train.global_batch=8", "train.micro_batch=8"],
    "tiny": ["input/tiny.yaml", "train.micro_batch=8"],
}
# fp32: kformer and PyTorch differ by summation order only (seen: 7e-8 and 1e-7 over 3 tiny steps,
# where an erf GELU, Adam's default betas or decay on the biases moved them by 5e-7..5e-6 and
# 5e-6..2e-4): (loss, gradient norm) within 1e-6 relative.
TOL_FP32 = (1e-6, 1e-6)
# bf16: the two round at different points, so their bound comes from bf16's rounding, not from a
# figure one CPU happened to give (an AVX2 EPYC gave a gradient norm 5.4e-3 apart, where the
# AVX-512 machines this was first written on gave 3e-4; the limit was 5e-3). See bf16_tolerances.
U_BF16 = 2.0 ** -8  # bf16's unit roundoff: 8 significant bits, round to nearest even
LAMBDA = 4.0        # P(a sum of r independent errors in [-u, u] exceeds LAMBDA sqrt(r) u) <= 2 exp(-LAMBDA^2 / 2) = 7e-4


def bf16_tolerances(cfg, step, logit_absmax, loss):
    """(loss, gradient norm) relative bounds at `step` (1-based) between kformer's bf16 and autocast's.

    Where the two round differently on the deepest path through the model (docs/bf16.md lists
    kformer's points): autocast also rounds, per block, the attention scores and the outputs of the
    two row-parallel linears (kformer keeps them fp32), and the logits: r_f = 3 L + 1 forward. In the
    backward it rounds the input gradients of the four linears and the attention's score gradient
    (kformer's GEMMs write fp32), then the head's input gradient and, once, the weight gradient
    itself: r_b = 5 L + 2. Each differing rounding moves a value by at most u relative, independently
    of the others, so with probability 1 - 7e-4 (Hoeffding) the relative error after r of them is at
    most LAMBDA sqrt(r) u. A step's update comes from that step's gradient, so step s carries the
    roundings of the s - 1 steps before it as well: r grows by s. The gradient norm's relative error
    is at most its elements' (| ||g + dg|| - ||g|| | <= ||dg||). The loss, a mean of logsumexp(z) -
    z_target, moves by at most 2 max|dz| <= 2 LAMBDA sqrt(s r_f) u max|z| in absolute terms.
    For input/tiny.yaml (L = 4) at step 1: gradient norm 9.2e-2, loss 2.4e-2 x max|z| / loss.
    Measured: 2.7e-4 and 7e-6 on AVX512-BF16 (Zen 5), 5.4e-3 and 5.4e-5 on an AVX2 EPYC. Planted in
    kformer's bf16 path only, a bf16 activation gradient at half its value gave a gradient norm
    7.5e-1 apart, the MLP branch's term of d x_mid dropped 1.3e-1: both fail (docs/bf16.md, "Tests").
    Faults that move the norm by less are left to the `reference` test, which mirrors kformer's
    rounding points in PyTorch and compares every gradient tensor.
    """
    L = cfg["model"]["n_layers"]
    r_f, r_b = 3 * L + 1, 5 * L + 2
    grad = LAMBDA * (step * (r_f + r_b)) ** 0.5 * U_BF16
    loss_rel = 2.0 * LAMBDA * (step * r_f) ** 0.5 * U_BF16 * logit_absmax / abs(loss)
    return loss_rel, grad


class Budget:
    """The seconds left of --budget-s (None: no limit)."""

    def __init__(self, seconds):
        self.end = None if seconds is None else time.monotonic() + seconds

    def left(self):
        return float("inf") if self.end is None else self.end - time.monotonic()


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def run_kformer(a, deck_args, tmp, rnd, extra=()):
    report = os.path.join(tmp, f"kformer{rnd}.json")
    env = dict(os.environ, OMP_PROC_BIND="false")
    if a.device == "cpu":
        env["OMP_NUM_THREADS"] = str(a.threads)
    cmd = [a.kformer, *deck_args, f"train.steps={a.steps}", f"train.precision={a.precision}", f"kernels.gemm={a.gemm}",
           f"kernels.attention={a.attention}", "comm.backend=self", f"output.json={report}", "output.log_every=1000",
           *extra]
    p = subprocess.run(cmd, env=env, cwd=a.root, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"step_vs_torch_gpu: kformer failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    with open(report) as f:
        return json.load(f)


def kformer_figures(rep, warmup):
    its = rep["iterations"]
    s = rep["summary"]
    return {"step_ms": statistics.median(i["elapsed_ms"] for i in its[warmup:]), "loss1": its[0]["loss"],
            "history": [(i["loss"], i["grad_norm"]) for i in its],
            "gemm_ceiling_tflops": s["gemm_ceiling_tflops"], "gemm_ceiling": s["gemm_ceiling"], "mfu_report": s["mfu"],
            "precision": s.get("precision"),
            # What kformer ran and why (auto: the rates it compared); absent from older reports.
            "kernels_attention": s.get("kernels_attention"), "kernels_gemm": s.get("kernels_gemm")}


class TorchVariant:
    """One PyTorch trainer (eager or compiled) of the deck's model, kept across rounds."""

    def __init__(self, name, cfg, params, a, tokens, compile_backend=None):
        self.name, self.cfg, self.a, self.tokens = name, cfg, a, tokens
        self.model = torch_gpt.TorchGPT(kformer_ref.Shape(cfg), params).to(a.device)
        self.model.track_logits = getattr(a, "track_logits", False)
        self.opt, self.optimizer = torch_gpt.adamw(self.model, cfg)
        self.forward = self.model
        self.compile_s = None
        if compile_backend:
            self.forward = torch.compile(self.model, backend=compile_backend)
        self.it = 0
        self.loss1 = None
        self.history = []  # (loss, gradient norm, max |logit|) of the first run's steps, for check_training

    def step(self):
        t = self.cfg["train"]
        tok = self.tokens[self.it % len(self.tokens)].to(self.a.device, non_blocking=True)
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=self.a.device, dtype=torch.bfloat16, enabled=self.a.precision == "bf16"):
            loss = self.forward(tok)
        loss.backward()
        norm = None
        if t["grad_clip"] > 0:
            with torch_gpt.region("kformer.clip", self.model.labels):
                norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), t["grad_clip"])
        for g in self.opt.param_groups:
            g["lr"] = kformer_ref.lr_at(self.it + 1, self.cfg)
        self.opt.step()
        self.it += 1
        return loss.item(), norm  # kformer reads its loss every step too

    def logit_absmax(self):
        """The last step's largest |logit| (tracked at small shapes only), else None."""
        m = self.model.logit_absmax
        return None if m is None else m.item()

    def timed_round(self, steps, warmup):
        times = []
        for i in range(steps):
            sync(self.a.device)
            start = time.perf_counter()
            loss, norm = self.step()
            sync(self.a.device)
            times.append((time.perf_counter() - start) * 1e3)
            if len(self.history) < steps:
                self.history.append((loss, None if norm is None else norm.item(), self.logit_absmax()))
            if self.loss1 is None:
                self.loss1 = loss
                if self.forward is not self.model:
                    self.compile_s = times[-1] / 1e3  # the first compiled step holds the compilation
        return statistics.median(times[warmup:])


def with_timeout(seconds, f):
    """f(), or TimeoutError after `seconds` (SIGALRM: the main thread, POSIX only)."""
    if seconds == float("inf"):
        return f()

    def expire(*_):
        raise TimeoutError(f"still running after {seconds:.0f} s (--budget-s)")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(max(1, int(seconds)))
    try:
        return f()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def matmul_tflops(device, shape, dtype):
    """torch.matmul's rate at kformer's ceiling shape "MxKxN": median of 10 after 3 warm-ups."""
    M, K, N = (int(x) for x in shape.split("x"))
    a = torch.randn(M, K, device=device, dtype=dtype)
    b = torch.randn(K, N, device=device, dtype=dtype)
    times = []
    for i in range(13):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        if i >= 3:
            times.append(time.perf_counter() - start)
    return 2.0 * M * K * N / statistics.median(times) / 1e12


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kformer", required=True, help="the kformer binary (the bundle's on the GPU)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="gpt2")
    ap.add_argument("--attention", choices=["auto", "naive", "fused", "batched_gemm", "vendor"], default="auto",
                    help="kformer's kernels.attention (PyTorch runs SDPA either way)")
    ap.add_argument("--gemm", choices=["auto", "native", "vendor"], default="auto", help="kformer's kernels.gemm")
    ap.add_argument("--steps", type=int, default=10, help="steps per run of each variant")
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of each run's median")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--compile", default="inductor", help="torch.compile backend, or off")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads of both (--device cpu)")
    ap.add_argument("--budget-s", type=float, help="no new round past this many seconds; compilation is cut there")
    ap.add_argument("--root", default=os.path.join(HERE, ".."), help="where the decks (input/) are")
    ap.add_argument("--json", help="write the figures here (rewritten after every round)")
    ap.add_argument("--kernel-times", action=argparse.BooleanOptionalAction, default=True,
                    help="after the rounds, one more kformer run with output.kernel_times=true: the step's time by "
                         "kernel family and entry point, measured (kformer.kernel_times in the JSON)")
    ap.add_argument("--torch-families", action=argparse.BooleanOptionalAction, default=True,
                    help="after the rounds, three eager steps under torch.profiler: PyTorch's step by kformer's kernel "
                         "families (eager.kernel_families in the JSON; bench/torch_families.py)")
    ap.add_argument("--keep-report", metavar="DIR",
                    help="also keep kformer's first report here as step_PRECISION_kformer.json (the platform's "
                         "input to scripts/portability.py)")
    a = ap.parse_args()
    a.kformer = os.path.abspath(a.kformer)
    if a.steps <= a.warmup:
        ap.error(f"--steps {a.steps} leaves no timed step after --warmup {a.warmup}")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("step_vs_torch_gpu: --device cuda but torch sees no GPU: run it on the GPU machine, or --device cpu")
    budget = Budget(a.budget_s)
    if a.device == "cpu":
        torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as kformer's cublasSgemm
    torch.backends.cudnn.allow_tf32 = False

    out = {"device": a.device, "gpu": torch.cuda.get_device_name() if a.device == "cuda" else None,
           "torch": torch.__version__, "precision": a.precision, "shape": a.shape, "steps": a.steps,
           "warmup": a.warmup, "rounds_asked": a.rounds, "rounds": 0, "attention": torch_gpt.attention_impl()[1],
           "kformer_attention": a.attention, "kformer_gemm": a.gemm,
           "kformer": {"step_ms_rounds": []}, "eager": {"step_ms_rounds": []}, "compile": {"step_ms_rounds": []}}

    def save():
        if a.json:
            with open(a.json + ".tmp", "w") as f:
                json.dump(out, f, indent=2)
            os.replace(a.json + ".tmp", a.json)

    variants, last_round_s, kformer_history = {}, 0.0, []
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(a.rounds):
            if budget.left() < 1.2 * last_round_s:
                out["stopped"] = f"round {rnd + 1} not started: {budget.left():.0f} s of --budget-s left, the last took {last_round_s:.0f} s"
                break
            round_start = time.monotonic()
            if a.device == "cuda":
                torch.cuda.empty_cache()  # kformer's process gets the memory torch holds idle
            kformer_start = time.monotonic()
            rep = run_kformer(a, SHAPES[a.shape], tmp, rnd)
            kformer_s = time.monotonic() - kformer_start
            k = kformer_figures(rep, a.warmup)
            out["kformer"]["step_ms_rounds"].append(k["step_ms"])
            # Each round is a fresh kformer process, so auto may pick differently: keep every round's.
            out["kformer"].setdefault("kinds_rounds", []).append(
                {"attention": (k["kernels_attention"] or {}).get("kind"), "gemm": (k["kernels_gemm"] or {}).get("impl")})
            if rnd == 0:
                if a.keep_report:  # the whole report of the first round, for scripts/portability.py
                    os.makedirs(a.keep_report, exist_ok=True)
                    with open(os.path.join(a.keep_report, f"step_{a.precision}_kformer.json"), "w") as f:
                        json.dump(rep, f, indent=1)
                out["kformer"].update({x: k[x] for x in ("loss1", "gemm_ceiling_tflops", "gemm_ceiling", "mfu_report",
                                                         "kernels_attention", "kernels_gemm")})
                kformer_history = k["history"]
                # MFU's convention (docs/figures.md): the model's FLOPs, Megatron-LM's and PaLM's
                # count (attention's full square), a rank's share; the kernels' causal count beside it.
                fl, world = rep["summary"]["flops"], rep.get("mesh", {}).get("world", 1) or 1
                out["flops_per_step"] = fl["model_per_iteration_all_ranks"] / world
                out["flops_per_step_counted"] = fl["counted_per_iteration_rank"]
                out["flops_basis"] = "model"
                out["config"] = {"model": rep["config"]["model"], "train": rep["config"]["train"]}
                variants = build_variants(a, rep["config"], out)
            for name, v in variants.items():
                if v is None:
                    continue
                if name == "compile" and v.loss1 is None:  # its first round compiles: bounded by the budget
                    try:
                        ms = with_timeout(budget.left(), lambda: v.timed_round(a.steps, a.warmup))
                    except Exception as e:  # noqa: BLE001 - any failure of torch.compile is a result
                        out["compile"].update(ok=False, error=f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
                        variants["compile"] = None
                        continue
                    out["compile"].update(ok=True, compile_s=v.compile_s)
                else:
                    ms = v.timed_round(a.steps, a.warmup)
                out[name]["step_ms_rounds"].append(ms)
                out[name]["loss1"] = v.loss1
                if rnd == 0:
                    out[name]["history"] = v.history
            out["rounds"] = rnd + 1
            last_round_s = time.monotonic() - round_start
            finish(out)
            save()
        # Where the step's time goes, measured: one more kformer run with output.kernel_times (each
        # call fenced, so outside the rounds' timings), when the budget leaves room for it.
        if a.kernel_times and out["rounds"] > 0 and budget.left() > 1.5 * kformer_s + 5:
            rep = run_kformer(a, SHAPES[a.shape], tmp, "_kernel_times", ["output.kernel_times=true"])
            out["kformer"]["kernel_times"] = rep["summary"].get("kernel_times")
            save()
        elif a.kernel_times:
            out["kformer"]["kernel_times_skipped"] = f"{budget.left():.0f} s of --budget-s left"
        eager = variants.get("eager")
        if a.torch_families and eager is not None and budget.left() > 10 * (out["eager"].get("step_ms") or 0) / 1e3 + 10:
            out["eager"]["kernel_families"] = eager_families(eager, a.device)
            save()
        elif a.torch_families:
            out["eager"]["kernel_families_skipped"] = f"{budget.left():.0f} s of --budget-s left" if eager else "no eager run"
    if a.device == "cuda" or a.shape == "tiny":
        shape = out["kformer"]["gemm_ceiling"]["shape"]
        out["torch_matmul_tflops"] = {p: matmul_tflops(a.device, shape, d)
                                      for p, d in (("fp32", torch.float32), ("bf16", torch.bfloat16))}
    out["kformer"]["history"] = kformer_history
    finish(out)
    bad = check_training(out)
    save()
    print_table(out)
    return bad


def eager_families(v, device):
    """The eager variant's step by kernel family (bench/torch_families.py), its regions labelled
    only while profiled, so that the timed rounds run the model as a user's would."""
    v.model.labels = True
    try:
        fam = torch_families.profile_families(v.step, device)
        if not fam["by_family_ms"]:  # a profiler without CUPTI records no kernels: say so
            fam["error"] = "torch.profiler recorded no device time (CUPTI missing?)"
        return fam
    except Exception as e:  # noqa: BLE001 - the rounds' figures stand without it
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}", "by_family_ms": {}}
    finally:
        v.model.labels = False


def build_variants(a, cfg, out):
    """The eager and compiled trainers, from kformer's initial weights at small shapes."""
    s, t = kformer_ref.Shape(cfg), cfg["train"]
    if t["micro_batch"] != t["global_batch"]:
        sys.exit("step_vs_torch_gpu: the PyTorch side runs the global batch at once: give train.micro_batch = train.global_batch")
    n_params = sum(r * c for _, r, c, *_ in kformer_ref.param_specs(s))
    exact = n_params <= 5_000_000  # kformer's counter-based initialisation runs in numpy: small models only
    params = torch_gpt.kformer_params(s, t["seed"]) if exact else torch_gpt.random_params(s, t["seed"], a.device)
    a.track_logits = exact  # the bf16 loss bound needs max |logit| (one reduction more per step)
    out["init"] = "kformer's initial weights" if exact else "torch generator, kformer's standard deviations"
    tokens = [kformer_ref.random_tokens(s.V, t["seed"], i * t["global_batch"], t["global_batch"], t["seq_len"])
              for i in range(a.steps)]  # kformer's batches, made before any timing
    variants = {"eager": TorchVariant("eager", cfg, params, a, tokens)}
    out["optimizer"] = variants["eager"].optimizer
    variants["compile"] = None
    if a.compile == "off":
        out["compile"].update(ok=False, error="--compile off")
    elif not hasattr(torch, "compile"):
        out["compile"].update(ok=False, error=f"torch {torch.__version__} has no torch.compile")
    else:
        try:
            variants["compile"] = TorchVariant("compile", cfg, params, a, tokens, compile_backend=a.compile)
            out["compile"]["backend"] = a.compile
        except Exception as e:  # noqa: BLE001
            out["compile"].update(ok=False, error=f"{type(e).__name__}: {e}")
    return variants


def finish(out):
    """Medians over rounds, the ratios and MFU, from what has run so far."""
    k = out["kformer"]
    for name in ("kformer", "eager", "compile"):
        r = out[name]["step_ms_rounds"]
        out[name]["step_ms"] = statistics.median(r) if r else None
        if r and out.get("flops_per_step"):
            out[name]["tflops"] = out["flops_per_step"] / (out[name]["step_ms"] / 1e3) / 1e12
    for name in ("eager", "compile"):
        t = out[name]["step_ms"]
        out[name]["torch_over_kformer"] = t / k["step_ms"] if t and k["step_ms"] else None
    e, c = out["eager"].get("loss1"), out["compile"].get("loss1")
    if e and c:  # the same weights and batch: the compiled model must compute eager's loss
        out["compile"]["loss1_rel_to_eager"] = abs(c - e) / abs(e)
    if k.get("tflops"):
        k["mfu"] = k["tflops"] / k["gemm_ceiling_tflops"] if k["gemm_ceiling_tflops"] else None
        bf16 = out.get("torch_matmul_tflops", {}).get("bf16")
        k["mfu_vs_torch_bf16_matmul"] = k["tflops"] / bf16 if bf16 and out["precision"] == "bf16" else None


def fmt(x, spec):
    """x formatted, or a dash as wide as the spec's width."""
    width = spec.split(".")[0]
    return format("-", ">" + width) if x is None else format(x, spec)


def print_table(out):
    k = out["kformer"]
    print(f"step_vs_torch_gpu: {out['device']} {out['gpu'] or ''} torch {out['torch']}, {out['shape']}, {out['precision']}, "
          f"{out['rounds']} round(s) of {out['steps']} steps (median after {out['warmup']}); attention: {out['attention']}; "
          f"init: {out.get('init')}; AdamW {out.get('optimizer')}")
    ka, kg = k.get("kernels_attention") or {}, k.get("kernels_gemm") or {}
    print(f"kformer ran attention {ka.get('kind', '?')} (kernels.attention={out['kformer_attention']}: "
          f"{ka.get('reason', 'not in its report')}), GEMM {kg.get('impl', '?')} (kernels.gemm={out.get('kformer_gemm')}: "
          f"{kg.get('reason', 'not in its report')})")
    print(f"{'variant':10s} {'step ms':>9s} {'torch/kformer':>14s} {'TFLOP/s':>9s} {'loss 1':>10s}")
    for name in ("kformer", "eager", "compile"):
        v = out[name]
        print(f"{name:10s} {fmt(v['step_ms'], '9.2f')} {fmt(v.get('torch_over_kformer'), '14.3f')} "
              f"{fmt(v.get('tflops'), '9.3f')} {fmt(v.get('loss1'), '10.5f')}")
    if out["compile"].get("ok") is False:
        print(f"compile: not timed: {out['compile']['error']}")
    elif out["compile"].get("compile_s") is not None:
        print(f"compile: first step (compilation included) {out['compile']['compile_s']:.1f} s")
    tm = out.get("torch_matmul_tflops", {})
    print(f"kformer MFU {fmt(k.get('mfu'), '.3f')} against its gemm_ceiling_tflops {fmt(k.get('gemm_ceiling_tflops'), '.3f')} "
          f"({k['gemm_ceiling']['impl']} {k['gemm_ceiling'].get('precision', 'fp32')} GEMM {k['gemm_ceiling']['shape']}); torch.matmul there: fp32 "
          f"{fmt(tm.get('fp32'), '.3f')}, bf16 {fmt(tm.get('bf16'), '.3f')} TFLOP/s"
          + (f"; bf16 MFU against torch's bf16 matmul {fmt(k.get('mfu_vs_torch_bf16_matmul'), '.3f')}"
             if out["precision"] == "bf16" else ""))
    kt = k.get("kernel_times")
    if kt:
        fam = sorted(kt["by_family_ms"].items(), key=lambda x: -x[1])
        print(f"kformer by kernel family, measured (ms of a step of {kt['step_ms']:.2f} with each call fenced): "
              + ", ".join(f"{f} {ms:.2f}" for f, ms in fam) + f"; outside the calls {kt['outside_calls_ms']:.2f}")
    tf = out["eager"].get("kernel_families")
    if tf and tf.get("error"):
        print(f"eager by kernel family: not measured: {tf['error']}")
    elif tf:
        print(f"eager by kernel family ({tf['source']}, ms of a step, {tf['total_ms']:.2f} in all): "
              + ", ".join(f"{f} {ms:.2f}" for f, ms in tf["by_family_ms"].items()))
    c = out.get("loss_check")
    if c:
        print(f"training check over {c['steps']} steps from kformer's weights: loss relative {c['loss_rel']:.1e} "
              f"(limit {c['loss_tol']:g}), gradient norm {c['norm_rel']:.1e} (limit {c['norm_tol']:g})"
              + ("" if c["ok"] else ": MISMATCH, PyTorch does not train kformer's model"))


def check_training(out):
    """From kformer's initial weights, PyTorch's first run must follow kformer's: every step's loss
    and gradient norm (before clipping) within TOL_FP32 in fp32, within bf16_tolerances in bf16."""
    if out.get("init") != "kformer's initial weights":
        return 0
    worst_loss = worst_norm = 0.0
    loss_tol = norm_tol = 0.0  # the bounds at the step where each ratio to its bound is largest
    ok = True
    pairs = list(zip(out["kformer"]["history"], out["eager"].get("history", [])))
    for step, ((kl, kn), (tl, tn, zmax)) in enumerate(pairs, start=1):
        lt, nt = TOL_FP32 if out["precision"] == "fp32" else bf16_tolerances(out["config"], step, zmax, kl)
        lr, nr = abs(kl - tl) / abs(kl), (abs(kn - tn) / abs(kn) if tn is not None else 0.0)
        if lr / lt >= worst_loss / max(loss_tol, 1e-300):
            worst_loss, loss_tol = lr, lt
        if nr / nt >= worst_norm / max(norm_tol, 1e-300):
            worst_norm, norm_tol = nr, nt
        ok = ok and lr <= lt and nr <= nt
    ok = ok and bool(pairs)
    out["loss_check"] = {"steps": len(pairs), "loss_rel": worst_loss, "norm_rel": worst_norm, "loss_tol": loss_tol,
                         "norm_tol": norm_tol,
                         "kformer": out["kformer"]["loss1"], "torch": out["eager"].get("loss1"), "ok": ok}
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
