#!/usr/bin/python3
"""kformer's training step against PyTorch CPU on the same shapes, threads and optimizer.

    bench/step_vs_torch.py [--kformer build/default/bin/kformer] [--threads 2] [--steps 6]

Cases (issue 5): the GPT-2-124M shape at B=4, T=64, and a 4-layer d=256 model. kformer runs one
rank with OMP_NUM_THREADS threads (the decks' kernels.gemm=auto, fused attention) and reports its
median step; the same model is built in PyTorch (float32, torch.set_num_threads, AdamW with
clipping) by scripts/reference/kformer_ref.py and timed the same way (median after the first
step). Prints both step times, their ratio and kformer's model FLOP/s over its measured GEMM
ceiling (the faster of native and vendor; --gemm sets the one the step uses, by default auto: the
faster at start-up). The GEMM column is the one the step used.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "reference"))
import torch  # noqa: E402

import kformer_ref  # noqa: E402

CASES = {
    "gpt2-124M B=4 T=64": ["input/gpt3-small.yaml", "model.max_seq_len=1024", "train.seq_len=64",
                           "train.global_batch=4", "train.micro_batch=4"],
    "4-layer d=256 B=4 T=64": ["input/gpt3-small.yaml", "model.n_layers=4", "model.d_model=256", "model.n_heads=4",
                               "model.vocab_size=8192", "model.max_seq_len=64", "train.seq_len=64",
                               "train.global_batch=4", "train.micro_batch=4"],
}


def torch_step_ms(cfg, steps, threads):
    torch.set_num_threads(threads)
    torch.set_default_dtype(torch.float32)
    s, t = kformer_ref.Shape(cfg), cfg["train"]
    P = {n: (p.detach().float().requires_grad_(True), d) for n, (p, d) in kformer_ref.init_params(s, t["seed"]).items()}
    opt = torch.optim.AdamW([p for p, _ in P.values()], lr=t["lr"], betas=(0.9, 0.95), eps=1e-8)
    times = []
    for it in range(steps):
        tok = kformer_ref.random_tokens(s.V, t["seed"], it * t["global_batch"], t["global_batch"], t["seq_len"])
        start = time.perf_counter()
        opt.zero_grad()
        loss = kformer_ref.forward(s, P, tok)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p, _ in P.values()], t["grad_clip"])
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kformer", default="build/default/bin/kformer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--gemm", default="auto", choices=["auto", "vendor", "native"], help="kformer's kernels.gemm")
    a = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), OMP_PROC_BIND="false")
    print(f"{'case':26s} {'kformer ms':>11s} {'torch ms':>9s} {'speed-up':>9s} {'kformer TF/s':>13s} {'ceiling TF/s':>12s} {'MFU':>9s} {'GEMM':>7s}")
    for name, args in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            report = os.path.join(tmp, "r.json")
            subprocess.run([a.kformer, *args, f"train.steps={a.steps}", f"kernels.gemm={a.gemm}", "kernels.attention=fused",
                            f"output.json={report}", "output.log_every=1000"], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            rep = json.load(open(report))
        k_ms = rep["summary"]["step_ms_median"]
        t_ms = torch_step_ms(rep["config"], a.steps, a.threads)
        tf, ceil = rep["summary"]["model_tflops_per_rank"], rep["summary"]["gemm_ceiling_tflops"]
        print(f"{name:26s} {k_ms:11.1f} {t_ms:9.1f} {t_ms / k_ms:8.2f}x {tf:13.4f} {ceil:12.4f} {tf / ceil:9.2f} {rep['summary']['kernels_gemm']['impl']:>7s}")


if __name__ == "__main__":
    main()
