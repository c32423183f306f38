#!/usr/bin/env bash
# Layout invariance: the same deck gives the same losses on every (tp, dp, zero) layout of 4
# ranks as on one rank (iteration 1 within 1e-6 relative, iteration 10 within 1e-4), for both
# families; and one layout run twice gives bitwise-identical losses.
#   layouts_test.sh KFORMER SOURCE_DIR MPIEXEC "MPIEXEC_FLAGS"
set -u
kformer=$1; src=$2; mpiexec=$3; mpiflags=$4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
deck=$src/input/tiny.yaml
fails=0

run() {  # name ranks overrides...
  local name=$1 np=$2; shift 2
  # shellcheck disable=SC2086  # the flags are a list
  if ! "$mpiexec" -n "$np" $mpiflags "$kformer" "$deck" train.steps=10 output.json="$tmp/$name.json" "$@" \
      >"$tmp/$name.log" 2>&1; then
    echo "FAIL: $name ($*) did not run:"; tail -5 "$tmp/$name.log"; fails=$((fails + 1)); return 1
  fi
}

compare() {  # base name rtol1 rtol10
  /usr/bin/python3 - "$tmp/$1.json" "$tmp/$2.json" "$3" "$4" "$2" <<'PY' || fails=$((fails + 1))
import json, sys
a = [r["loss"] for r in json.load(open(sys.argv[1]))["iterations"]]
b = [r["loss"] for r in json.load(open(sys.argv[2]))["iterations"]]
t1, t10, name = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
r1, r10 = abs(a[0] - b[0]) / abs(a[0]), abs(a[9] - b[9]) / abs(a[9])
ok = r1 <= t1 and r10 <= t10
print(f"{'ok  ' if ok else 'FAIL'} {name:28s} loss1 {b[0]:.9f} (rel {r1:.1e})  loss10 {b[9]:.9f} (rel {r10:.1e})")
sys.exit(0 if ok else 1)
PY
}

for family in gpt llama; do
  fam=(model.family="$family")
  [ "$family" = llama ] && fam+=(model.n_heads=8 model.n_kv_heads=4)
  run "$family-1" 1 "${fam[@]}" || continue
  for layout in "tp=2 dp=2 zero=0" "tp=4 dp=1 zero=0" "tp=1 dp=4 zero=0" "tp=1 dp=4 zero=3" "tp=2 dp=2 zero=3"; do
    read -r tp dp zero <<<"$layout"
    name="$family-${tp}-${dp}-${zero}"
    run "$name" 4 "${fam[@]}" "parallel.$tp" "parallel.$dp" "parallel.$zero" && compare "$family-1" "$name" 1e-6 1e-4
  done
  # Determinism: the same layout twice, bitwise.
  run "$family-again" 4 "${fam[@]}" parallel.tp=2 parallel.dp=2 parallel.zero=0 &&
    compare "$family-tp=2-dp=2-zero=0" "$family-again" 0 0
done
[ $fails -eq 0 ] && echo "layouts: all checks passed"
exit $((fails > 0))
