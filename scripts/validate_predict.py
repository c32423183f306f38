#!/usr/bin/python3
"""Checks `kformer predict` against real runs on this machine.

Runs a matrix of real 2-rank runs with one thread each and predicts each with
the same deck and overrides: pp=2 with gpipe, 1f1b and interleaved at micro-batch sizes 1, 2, 4,
8 (16, 8, 4, 2 micro-batches of a 16-sequence batch); dp=2; tp=2; ZeRO-3; bf16, recomputation,
sequence parallelism and a bf16 gradient reduce; emulated networks of
0/1/5/10 ms latency and 10/5/2/1 Gbit/s; a straggler. Before each run this machine is calibrated at
that run's shapes (`kformer calibrate` under mpirun, a few seconds), because the share of the
cores the ranks get moves as other jobs come and go. Prints predicted against measured step
time, bubble and peak memory in one table, with the median and largest absolute errors.

  scripts/validate_predict.py [--kformer build/default/bin/kformer] [--out DIR] [--steps N] [--repeat N]

Run it on an idle machine if you can: the step times of a loaded one wander by several percent.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

# A small gpt: big enough that compute outweighs the scheduler's noise, small enough for seconds.
DECK = "input/tiny.yaml"
SHAPE = ["model.d_model=128", "model.n_heads=4", "model.vocab_size=512", "model.max_seq_len=64",
         "train.seq_len=64", "train.global_batch=16"]
MICRO = [1, 2, 4, 8]


def cases():
    out = []
    for sched in ["gpipe", "1f1b", "interleaved"]:
        for mb in MICRO:
            o = ["parallel.pp=2", f"parallel.schedule={sched}", f"train.micro_batch={mb}"]
            if sched == "interleaved":
                o.append("parallel.virtual_stages=2")
            out.append((f"pp=2 {sched} mb={mb} (m={16 // mb})", o))
    out.append(("dp=2 mb=2", ["parallel.dp=2", "train.micro_batch=2"]))
    out.append(("tp=2 mb=2", ["parallel.tp=2", "train.micro_batch=2"]))
    out.append(("dp=2 zero=3 mb=2", ["parallel.dp=2", "parallel.zero=3", "train.micro_batch=2"]))
    # What predict now costs from the trainer's own calls (issue 26): bf16, recomputation, sequence
    # parallelism, a bf16 gradient reduce.
    out.append(("pp=2 1f1b bf16 mb=2", ["parallel.pp=2", "parallel.schedule=1f1b", "train.micro_batch=2",
                                        "train.precision=bf16"]))
    out.append(("dp=2 recompute=full mb=2", ["parallel.dp=2", "train.recompute=full", "train.micro_batch=2"]))
    out.append(("tp=2 sp mb=2", ["parallel.tp=2", "parallel.sequence_parallel=true", "train.micro_batch=2"]))
    out.append(("tp=2 bf16 selective mb=2", ["parallel.tp=2", "train.precision=bf16", "train.recompute=selective",
                                             "train.micro_batch=2"]))
    out.append(("dp=2 bf16 reduce mb=2", ["parallel.dp=2", "train.precision=bf16", "parallel.grad_reduce_dtype=bf16",
                                          "train.micro_batch=2"]))
    for lat_ms, bw in [(0, 10), (1, 5), (5, 2), (10, 1)]:
        for sched in ["gpipe", "1f1b"]:
            out.append((f"pp=2 {sched} mb=4 net {lat_ms} ms {bw} Gbit/s",
                        ["parallel.pp=2", f"parallel.schedule={sched}", "train.micro_batch=4",
                         f"comm.emulate.latency_us={lat_ms * 1000}", f"comm.emulate.bandwidth_gbps={bw}"]))
    out.append(("dp=2 mb=2 straggler rank 1 x2", ["parallel.dp=2", "train.micro_batch=2", "straggler.rank=1",
                                                 "straggler.slowdown=2"]))
    return out


def mpirun(args):
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_PROC_BIND="false")
    cmd = ["mpirun", "-n", "2", "--oversubscribe", "--allow-run-as-root"] + args
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"validate_predict: {' '.join(cmd)} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")


def err(p, m):
    return (p - m) / m if m else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kformer", default="build/default/bin/kformer")
    ap.add_argument("--out", default="build/validate_predict")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of (calibrate, run, predict) per case; medians")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    machine = os.path.join(a.out, "machine.yaml")
    rows = []
    for name, o in cases():
        if a.only and a.only not in name:
            continue
        run_json, pred_json = os.path.join(a.out, "run.json"), os.path.join(a.out, "predict.json")
        common = [DECK] + SHAPE + o
        got = []
        for _ in range(a.repeat):
            # The cores are shared with whatever else runs, and their share moves from minute to
            # minute: this machine is measured right before each run, at that run's shapes.
            if os.path.exists(machine):
                os.remove(machine)
            mpirun([a.kformer, "calibrate"] + common + [f"predict.machine={machine}"])
            mpirun([a.kformer] + common + [f"train.steps={a.steps}", f"output.json={run_json}", "output.log_every=1000"])
            r = subprocess.run([a.kformer, "predict"] + common + ["predict.world=2", f"predict.machine={machine}",
                                                                  f"output.json={pred_json}"], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"validate_predict: predict failed for {name}:\n{r.stderr}")
            m, p = json.load(open(run_json))["summary"], json.load(open(pred_json))["summary"]
            got.append((m["step_ms_median"], p["step_ms_median"], m["pipeline"]["bubble_measured"],
                        p["pipeline"]["bubble_measured"], m["memory"]["peak_bytes"] / 1e6, p["memory"]["peak_bytes"] / 1e6))
        # With --repeat N, the median of each column over the N (calibrate, run, predict) rounds.
        rows.append((name,) + tuple(statistics.median(g[i] for g in got) for i in range(6)))
        x = rows[-1]
        print(f"{x[0]:42s} step {x[1]:9.2f} ms measured {x[2]:9.2f} predicted ({100 * err(x[2], x[1]):+6.1f}%)",
              flush=True, file=sys.stderr)
    print(f"| case | step measured (ms) | step predicted (ms) | error | bubble measured | bubble predicted "
          f"| peak memory measured (MB) | predicted (MB) | error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for x in rows:
        print(f"| {x[0]} | {x[1]:.2f} | {x[2]:.2f} | {100 * err(x[2], x[1]):+.1f}% | {x[3]:.3f} | {x[4]:.3f} "
              f"| {x[5]:.1f} | {x[6]:.1f} | {100 * err(x[6], x[5]):+.1f}% |")
    step_errs = [abs(err(x[2], x[1])) for x in rows]
    mem_errs = [abs(err(x[6], x[5])) for x in rows]
    print(f"\nstep time: median absolute error {100 * statistics.median(step_errs):.1f}%, "
          f"largest {100 * max(step_errs):.1f}% ({sum(e > 0.25 for e in step_errs)} above 25%) over {len(rows)} runs")
    print(f"peak memory: median absolute error {100 * statistics.median(mem_errs):.1f}%, "
          f"largest {100 * max(mem_errs):.1f}%")


if __name__ == "__main__":
    main()
