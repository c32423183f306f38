#!/usr/bin/env bash
# Sequence parallelism (parallel.sequence_parallel=true): on tp layouts of 4 ranks, both families,
# the losses and gradient norms equal those of the same layout without it (within the bounds of
# same_training.py), also with pipeline stages, ZeRO-3 and recomputation on; and the
# activation memory per rank, measured from the allocated buffers, is the one-rank figure over at
# least 0.8*tp at tp=2 and tp=4 (with the fused attention, where the replicated part weighs most);
# in bf16 mixed precision (tp=4, tp=2 pp=2) within the bf16 bounds of the same bf16 layout
# without it.
#   sequence_parallel_test.sh KFORMER SOURCE_DIR MPIEXEC "MPIEXEC_FLAGS"
set -u
kformer=$1; src=$2; mpiexec=$3; mpiflags=$4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# kernels.gemm=native: the runs are compared bit for bit, and auto could take another GEMM in each.
deck=$src/input/tiny.yaml
fails=0

run() {  # name ranks overrides...
  local name=$1 np=$2; shift 2
  # shellcheck disable=SC2086  # the flags are a list
  if ! "$mpiexec" -n "$np" $mpiflags "$kformer" "$deck" kernels.gemm=native train.steps=10 kernels.attention=fused \
      output.json="$tmp/$name.json" "$@" >"$tmp/$name.log" 2>&1; then
    echo "FAIL: $name ($*) did not run:"; tail -5 "$tmp/$name.log"; fails=$((fails + 1)); return 1
  fi
}

compare() {  # base name [tp [precision]]: losses and gradient norms (same_training.py), and with tp > 0
            # the activation memory against the base's
  local cut=()
  [ "${3:-0}" -gt 0 ] && cut=(--activations-cut "$(awk "BEGIN {print 0.8 * $3}")")
  /usr/bin/python3 "$src/tests/miniapp/same_training.py" "$tmp/$1.json" "$tmp/$2.json" "$2" \
    --precision "${4:-fp32}" "${cut[@]}" || fails=$((fails + 1))
}

for family in gpt llama; do
  fam=(model.family="$family")
  [ "$family" = llama ] && fam+=(model.n_heads=8 model.n_kv_heads=4)
  run "$family-1" 1 "${fam[@]}" || continue
  for layout in "tp=2 dp=2" "tp=4" "tp=2 pp=2" "tp=2 dp=2 zero=3"; do
    args=()
    for kv in $layout; do args+=("parallel.$kv"); done
    name="$family-${layout// /-}"
    run "$name" 4 "${fam[@]}" "${args[@]}" || continue
    tp=0
    case $layout in "tp=2 dp=2" | "tp=4") tp=${layout:3:1} ;; esac
    run "$name-sp" 4 "${fam[@]}" "${args[@]}" parallel.sequence_parallel=true &&
      compare "$name" "$name-sp" && { [ "$tp" -eq 0 ] || compare "$family-1" "$name-sp" "$tp"; }
  done
  run "$family-sp-recompute" 4 "${fam[@]}" parallel.tp=2 parallel.pp=2 parallel.sequence_parallel=true \
    train.recompute=full && compare "$family-tp=2-pp=2" "$family-sp-recompute"
  # bf16 mixed precision: against the same bf16 layout without sequence parallelism, within the bf16
  # bounds (with pipeline stages: the bf16 messages carry rows).
  for layout in "tp=4" "tp=2 pp=2"; do
    args=(train.precision=bf16)
    for kv in $layout; do args+=("parallel.$kv"); done
    name="$family-bf16-${layout// /-}"
    run "$name" 4 "${fam[@]}" "${args[@]}" &&
      run "$name-sp" 4 "${fam[@]}" "${args[@]}" parallel.sequence_parallel=true &&
      compare "$name" "$name-sp" 0 bf16
  done
done
[ $fails -eq 0 ] && echo "sequence_parallel: all checks passed"
exit $((fails > 0))
