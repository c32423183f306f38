#!/usr/bin/env bash
# Universal checkpoints (issue 7), on 4 ranks:
#  - continuity: 20 iterations straight on one rank; 10 at tp=2 pp=2, saved; resumed at pp=4,
#    tp=4, dp=4 zero=3 to 20: iterations 11-20's losses and gradient norms within same_training.py's
#    bounds of the straight run, and bitwise equal where the layout is the same (tp=2 pp=2 straight
#    vs resumed, one rank straight vs resumed);
#    a llama run saved at tp=2 dp=2 zero=1, resumed at pp=2 dp=2 zero=2 interleaved;
#  - a save interrupted by SIGKILL of one rank leaves the previous checkpoint loadable and identical;
#    a write that fails on one rank stops every rank with exit code 5, the previous checkpoint kept;
#  - missing, truncated, corrupted and mismatched checkpoints: exit 2, one line naming the tensor
#    or file and the fix, nothing overwritten.
#   checkpoint_test.sh KFORMER SOURCE_DIR MPIEXEC "MPIEXEC_FLAGS"
set -u
kformer=$1; src=$2; mpiexec=$3; mpiflags=$4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# kernels.gemm=native: the runs are compared bit for bit, and auto could take another GEMM in each.
deck=$src/input/tiny.yaml
fails=0

run() {  # name ranks overrides...   (train.steps=20 always: the schedule's length)
  local name=$1 np=$2; shift 2
  # shellcheck disable=SC2086  # the flags are a list
  if ! "$mpiexec" -n "$np" $mpiflags "$kformer" "$deck" kernels.gemm=native train.steps=20 output.json="$tmp/$name.json" "$@" \
      >"$tmp/$name.log" 2>&1; then
    echo "FAIL: $name ($*) did not run:"; tail -5 "$tmp/$name.log"; fails=$((fails + 1)); return 1
  fi
}

compare() {  # straight resumed [bitwise]: iterations 11-20, their losses and gradient norms bitwise
            # equal, or within same_training.py's bounds (the runs differ in layout from iteration 1)
  /usr/bin/python3 - "$tmp/$1.json" "$tmp/$2.json" "$2" "${3:-}" <<'PY' || { fails=$((fails + 1)); return; }
import json, sys
a = {r["iteration"]: (r["loss"], r["grad_norm"]) for r in json.load(open(sys.argv[1]))["iterations"]}
b = json.load(open(sys.argv[2]))["iterations"]
its = [r["iteration"] for r in b]
ok = its == list(range(11, 21))
if sys.argv[4] == "bitwise":
    ok = ok and all((r["loss"], r["grad_norm"]) == a[r["iteration"]] for r in b)
    print(f"{'ok  ' if ok else 'FAIL'} {sys.argv[3]:22s} iterations {its[0]}-{its[-1]}: losses and gradient norms bitwise")
elif not ok:
    print(f"FAIL {sys.argv[3]:22s} iterations {its}, not 11-20")
sys.exit(0 if ok else 1)
PY
  [ "${3:-}" = bitwise ] || /usr/bin/python3 "$src/tests/miniapp/same_training.py" "$tmp/$1.json" "$tmp/$2.json" "$2" ||
    fails=$((fails + 1))
}

# Continuity across layouts.
run straight 1
run straight22 4 parallel.tp=2 parallel.pp=2
run first 4 parallel.tp=2 parallel.pp=2 train.stop_at=10 checkpoint.save="$tmp/ck"
if [ "$(cat "$tmp/ck/latest" 2>/dev/null)" != iter_0000010 ]; then echo "FAIL: no ck/latest -> iter_0000010"; fails=$((fails + 1)); fi
run pp4 4 parallel.pp=4 checkpoint.load="$tmp/ck" && compare straight pp4
run tp4 4 parallel.tp=4 checkpoint.load="$tmp/ck" && compare straight tp4
run dp4z3 4 parallel.dp=4 parallel.zero=3 checkpoint.load="$tmp/ck" && compare straight dp4z3
run same22 4 parallel.tp=2 parallel.pp=2 checkpoint.load="$tmp/ck/iter_0000010" && compare straight22 same22 bitwise
run one10 1 train.stop_at=10 checkpoint.save="$tmp/ck1" && run one 1 checkpoint.load="$tmp/ck1" && compare straight one bitwise
grep -q "continuing at iteration 11" "$tmp/pp4.log" || { echo "FAIL: no resume line"; fails=$((fails + 1)); }
llama=(model.family=llama model.n_kv_heads=2)
run lstraight 1 "${llama[@]}"
run lfirst 4 "${llama[@]}" parallel.tp=2 parallel.dp=2 parallel.zero=1 train.stop_at=10 checkpoint.save="$tmp/lck"
run linter 4 "${llama[@]}" parallel.pp=2 parallel.dp=2 parallel.zero=2 parallel.schedule=interleaved \
  parallel.virtual_stages=2 checkpoint.load="$tmp/lck" && compare lstraight linter

# An interrupted save: rank 1 is killed halfway through writing the save of iteration 10; the one
# of iteration 5 stays as an uninterrupted run wrote it, `latest` names it, and it resumes.
run full 4 parallel.tp=2 parallel.pp=2 train.stop_at=10 checkpoint.every=5 checkpoint.save="$tmp/full"
# shellcheck disable=SC2086
KFORMER_TEST_SAVE_FAULT=kill:1@10 "$mpiexec" -n 4 $mpiflags "$kformer" "$deck" kernels.gemm=native \
  train.steps=20 parallel.tp=2 parallel.pp=2 train.stop_at=10 checkpoint.every=5 checkpoint.save="$tmp/killed" \
  >"$tmp/killed.log" 2>&1
rc=$?
same=$(cd "$tmp" && cmp -s full/iter_0000005/model.safetensors killed/iter_0000005/model.safetensors &&
       cmp -s full/iter_0000005/optimizer.safetensors killed/iter_0000005/optimizer.safetensors && echo yes)
latest=$(cat "$tmp/killed/latest" 2>/dev/null)
if [ $rc -ne 0 ] && [ "$same" = yes ] && [ "$latest" = iter_0000005 ] && [ ! -e "$tmp/killed/iter_0000010" ]; then
  echo "ok   killed mid-save (exit $rc): iter_0000005 byte-identical, latest -> $latest, no iter_0000010"
else
  echo "FAIL: killed mid-save: exit $rc, iter_0000005 identical: ${same:-no}, latest: $latest"; fails=$((fails + 1))
fi
run after_kill 4 parallel.dp=2 parallel.tp=2 checkpoint.load="$tmp/killed" train.stop_at=6 &&
  /usr/bin/python3 - "$tmp/after_kill.json" <<'PY' && /usr/bin/python3 "$src/tests/miniapp/same_training.py" \
    "$tmp/straight.json" "$tmp/after_kill.json" "resumed after the kill" || fails=$((fails + 1))
import json, sys
its = [r["iteration"] for r in json.load(open(sys.argv[1]))["iterations"]]
print(f"{'ok  ' if its == [6] else 'FAIL'} resumed after the kill: iterations {its} (6 alone)")
sys.exit(0 if its == [6] else 1)
PY

# A write that fails on one rank (a full disk): every rank stops with exit code 5, one line, and
# the previous checkpoint is untouched.
cp -r "$tmp/full" "$tmp/failing"
# shellcheck disable=SC2086
KFORMER_TEST_SAVE_FAULT=fail:0@10 "$mpiexec" -n 4 $mpiflags "$kformer" "$deck" kernels.gemm=native train.steps=20 parallel.tp=2 \
  parallel.pp=2 train.stop_at=10 checkpoint.every=5 checkpoint.save="$tmp/failing" >"$tmp/failing.log" 2>&1
rc=$?
msg=$(grep "kformer: error" "$tmp/failing.log")
if [ $rc -eq 5 ] && echo "$msg" | grep -q "No space left on device.*previous checkpoint is untouched" &&
   [ "$(cat "$tmp/failing/latest")" = iter_0000005 ] && cmp -s "$tmp/full/iter_0000005/model.safetensors" \
   "$tmp/failing/iter_0000005/model.safetensors"; then
  echo "ok   failed write: exit 5, $msg"
else
  echo "FAIL: failed write: exit $rc (want 5), message: $msg"; fails=$((fails + 1))
fi

# Bad checkpoints: one line, exit 2, the files as they were.
cp -r "$tmp/ck" "$tmp/bad"
bad=$tmp/bad/iter_0000010
expect() {  # name "pattern" overrides...
  local name=$1 pattern=$2; shift 2
  local before after
  before=$(cat "$tmp"/bad/*/* 2>/dev/null | sha256sum)
  "$kformer" "$deck" kernels.gemm=native train.steps=20 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  after=$(cat "$tmp"/bad/*/* 2>/dev/null | sha256sum)
  local msg; msg=$(grep -v "^$" "$tmp/$name.err")
  if [ $rc -eq 2 ] && [ "$(echo "$msg" | wc -l)" -eq 1 ] && echo "$msg" | grep -q -- "$pattern" && [ "$before" = "$after" ]; then
    echo "ok   $name: $msg"
  else
    echo "FAIL: $name: exit $rc (want 2), stderr: $msg (want one line matching '$pattern'), files unchanged: $([ "$before" = "$after" ] && echo yes || echo no)"
    fails=$((fails + 1))
  fi
}
expect missing "no such directory" checkpoint.load="$tmp/nowhere"
expect unwritable "checkpoint.save=/proc/kformer-ck is not writable" checkpoint.save=/proc/kformer-ck
expect empty_dir "neither checkpoint.json nor" checkpoint.load="$tmp"
expect shape "model.d_model is 64 in the checkpoint, 128 in the deck" checkpoint.load="$tmp/bad" model.d_model=128
expect layers "has no tensor 'layers.4" checkpoint.load="$tmp/bad" model.n_layers=6
expect "done" "train.steps counts from the start of the run: raise it above 10" checkpoint.load="$tmp/bad" train.steps=10
/usr/bin/python3 - "$bad/model.safetensors" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[-1000] ^= 0x10; open(p, "wb").write(b)
PY
expect corrupt "fails its checksum" checkpoint.load="$tmp/bad" checkpoint.save="$tmp/bad"
cp "$tmp/ck/iter_0000010/model.safetensors" "$bad/model.safetensors"
truncate -s -4096 "$bad/optimizer.safetensors"
expect truncated "optimizer.safetensors is truncated" checkpoint.load="$tmp/bad" checkpoint.save="$tmp/bad"
echo "not json" >"$bad/checkpoint.json"
expect metadata "checkpoint.json is corrupted" checkpoint.load="$tmp/bad"

[ $fails -eq 0 ] && echo "checkpoint: all checks passed"
exit $((fails > 0))
