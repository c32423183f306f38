#!/usr/bin/env bash
# One held-out case of issue 26's CPU check of `kformer predict`: a 2-rank llama (4 layers, d 256,
# 4 heads, 2 KV heads, T 128, 16 sequences, micro-batch 2) with the layout given as overrides.
# Calibrates this machine at the case's shapes under mpirun, runs 12 steps, predicts the same deck,
# and prints measured against predicted step time and its split.
#
#   scripts/predict_heldout.sh parallel.dp=2 [key=value ...]     (KFORMER: the binary to use)
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K=${KFORMER:-$top/build/default/bin/kformer}
cd "$top"
shape=(model.family=llama model.d_model=256 model.n_heads=4 model.n_kv_heads=2 model.vocab_size=512
       model.max_seq_len=128 train.seq_len=128 train.global_batch=16 train.micro_batch=2 kernels.gemm=auto "$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 OMP_PROC_BIND=false
mpi=(mpirun -n 2 --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
"${mpi[@]}" "$K" calibrate input/tiny.yaml "${shape[@]}" predict.machine="$tmp/machine.yaml" >"$tmp/cal.log" 2>&1 ||
  { tail "$tmp/cal.log"; exit 1; }
"${mpi[@]}" "$K" input/tiny.yaml "${shape[@]}" train.steps=12 output.json="$tmp/run.json" output.log_every=1000 \
  >"$tmp/run.log" 2>&1 || { tail "$tmp/run.log"; exit 1; }
"$K" predict input/tiny.yaml "${shape[@]}" predict.world=2 predict.machine="$tmp/machine.yaml" \
  output.json="$tmp/pred.json" >"$tmp/pred.log" 2>&1 || { tail "$tmp/pred.log"; exit 1; }
/usr/bin/python3 - "$tmp/run.json" "$tmp/pred.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["summary"]
p = json.load(open(sys.argv[2]))["summary"]
print(f"step ms: measured {m['step_ms_median']:.2f}, predicted {p['step_ms_median']:.2f} "
      f"({100 * (p['step_ms_median'] / m['step_ms_median'] - 1):+.1f}%)")
for k in ["forward", "backward", "optimizer", "comm_exposed", "comm_total"]:
    print(f"  {k:13s} {m['time_split_ms'][k]:9.2f} {p['time_split_ms'][k]:9.2f}")
print(f"  ranks apart: the run's straggler slowdown {m['straggler']['slowdown']:.3f}")
PY
