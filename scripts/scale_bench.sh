#!/usr/bin/env bash
# The figures of docs/scale.md (benchmarks, not tests): ZB-H1 against 1F1B (bubble and step time,
# pp=4, 8 micro-batches), and the activation memory of train.recompute and of
# parallel.sequence_parallel on GPT-3 Small's layer shapes at a reduced length. Timings alternate
# the two schedules run by run, so that the machine's load falls on both alike; the ratios are
# per pair. Memory figures come from the allocated buffers and do not depend on the load.
#   scripts/scale_bench.sh KFORMER [PAIRS] [MPI launcher and flags...]
# e.g. scripts/scale_bench.sh build/default/bin/kformer 5 mpirun --oversubscribe --allow-run-as-root
# SECTIONS="zb recompute sp" (the default) picks the figures.
set -u
kformer=$1; pairs=${2:-5}; shift 2 || shift $#
launch=("$@"); [ ${#launch[@]} -eq 0 ] && launch=(mpirun)
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
echo "# $(date -u +%FT%TZ) $(uptime)"

field() {  # json python-expression-on-s
  /usr/bin/python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['summary']; print($2)" "$1"
}

want() { [[ " ${SECTIONS:-zb recompute sp} " == *" $1 "* ]]; }

if want zb; then
echo "## ZB-H1 vs 1F1B: pp=4, m=8 (8 layers, d 256, seq 128, micro-batch 2), $pairs alternating pairs"
pipe=(model.n_layers=8 model.d_model=256 model.n_heads=8 model.max_seq_len=128 train.seq_len=128
      train.micro_batch=2 train.global_batch=16 parallel.pp=4 train.steps=6)
for i in $(seq "$pairs"); do
  for s in 1f1b zb-h1; do
    "${launch[@]}" -n 4 "$kformer" "$src/input/tiny.yaml" "${pipe[@]}" parallel.schedule=$s output.json="$tmp/$s.json" \
      >"$tmp/$s.log" 2>&1 || { echo "$s failed"; tail -3 "$tmp/$s.log"; exit 1; }
  done
  /usr/bin/python3 - "$tmp/1f1b.json" "$tmp/zb-h1.json" "$i" <<'PY'
import json, sys
a, b = (json.load(open(p))["summary"] for p in sys.argv[1:3])
ba, bb = a["pipeline"]["bubble_measured"], b["pipeline"]["bubble_measured"]
print(f"pair {sys.argv[3]}: bubble 1f1b {ba:.3f} (analytic {a['pipeline']['bubble_analytic']:.3f}), "
      f"zb-h1 {bb:.3f} (analytic {b['pipeline']['bubble_analytic']:.3f}), ratio {bb / ba:.2f}; "
      f"step ms 1f1b {a['step_ms_median']:.0f}, zb-h1 {b['step_ms_median']:.0f}, ratio {b['step_ms_median'] / a['step_ms_median']:.2f}")
PY
done

fi

if want recompute; then
echo "## train.recompute on GPT-3 Small's layers (12 x d 768, 12 heads, vocab 50257), seq 256, micro-batch 1, one rank"
small=(model.n_layers=12 model.d_model=768 model.n_heads=12 model.vocab_size=50257 model.max_seq_len=256
       train.seq_len=256 train.micro_batch=1 train.global_batch=1 train.steps=2)
for attention in naive fused; do
  for mode in none selective full; do
    "$kformer" "$src/input/tiny.yaml" "${small[@]}" kernels.attention=$attention train.recompute=$mode \
      output.json="$tmp/r-$mode.json" >"$tmp/r.log" 2>&1 || { echo "recompute $mode failed"; tail -3 "$tmp/r.log"; exit 1; }
  done
  none=$(field "$tmp/r-none.json" "s['memory']['activation_bytes_measured']")
  for mode in none selective full; do
    field "$tmp/r-$mode.json" "f\"$attention $mode: activations {s['memory']['activation_bytes_measured']/1e6:.1f} MB \
= {s['memory']['activation_bytes_measured']/$none:.3f} of none; estimate {s['memory']['activation_bytes_estimated']/1e6:.1f} MB; \
allocated peak {s['memory']['allocated_peak_bytes']/1e6:.0f} MB; recompute/model FLOPs \
{s['flops']['recompute_per_iteration_rank']/s['flops']['counted_per_iteration_rank']:.3f}; step {s['step_ms_median']:.0f} ms\""
  done
done

fi

if want sp; then
echo "## parallel.sequence_parallel on the same layers (fused attention), activations per rank against one rank"
for family in gpt llama; do
  fam=(model.family="$family")
  "$kformer" "$src/input/tiny.yaml" "${small[@]}" "${fam[@]}" kernels.attention=fused output.json="$tmp/s1.json" \
    >"$tmp/s.log" 2>&1 || { echo "one rank failed"; tail -3 "$tmp/s.log"; exit 1; }
  one=$(field "$tmp/s1.json" "s['memory']['activation_bytes_measured']")
  for tp in 2 4; do
    for sp in false true; do
      "${launch[@]}" -n $tp "$kformer" "$src/input/tiny.yaml" "${small[@]}" "${fam[@]}" kernels.attention=fused \
        parallel.tp=$tp parallel.sequence_parallel=$sp output.json="$tmp/s.json" >"$tmp/s.log" 2>&1 ||
        { echo "tp=$tp sp=$sp failed"; tail -3 "$tmp/s.log"; exit 1; }
      field "$tmp/s.json" "f\"$family tp=$tp sequence_parallel=$sp: activations {s['memory']['activation_bytes_measured']/1e6:.1f} MB per rank, \
one rank's / {$one/s['memory']['activation_bytes_measured']:.2f}\""
    done
  done
done
fi
echo "# $(date -u +%FT%TZ) $(uptime)"
