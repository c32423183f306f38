#!/usr/bin/env bash
# The kformer driver end to end: what a user sees on good and bad command lines.
#   cli_test.sh KFORMER SOURCE_DIR [MPIEXEC "MPIEXEC_FLAGS"]
# Without MPIEXEC (test cli) the one-process checks; with it (test cli_np4) the multi-rank checks
# alone (the mesh, the backend, a bad deck and a stop each reported once), since the cli test
# runs the one-process checks in the same build.
set -u
kformer=$1; src=$2; mpiexec=${3:-}; mpiflags=${4:-}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC_WANTED(0|nonzero) PATTERN -- command...   (pattern searched in stdout+stderr)
expect() {
  local want=$1 pattern=$2; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ "$want" = 0 ] && [ $rc -ne 0 ]; then fail "$* exited $rc"; cat "$tmp/err"; return; fi
  if [ "$want" != 0 ] && [ $rc -eq 0 ]; then fail "$* exited 0, expected an error"; return; fi
  grep -qF -- "$pattern" "$tmp/out" "$tmp/err" || { fail "$*: output lacks '$pattern'"; cat "$tmp/out" "$tmp/err"; }
}

if [ -n "$mpiexec" ]; then
  # shellcheck disable=SC2086  # the flags are a list
  expect 0 "tp groups [[0,1],[2,3]]" -- "$mpiexec" -n 4 $mpiflags "$kformer" "$src/input/tiny.yaml" \
    parallel.tp=2 output.json="$tmp/run.json"
  grep -qF "dp groups [[0,2],[1,3]]" "$tmp/out" || fail "4-rank tp=2 dp groups"
  grep -qE '^  comm\.backend += auto -> mpi \(no NCCL in this build\)$' "$tmp/out" \
    || fail "4 ranks: $(grep comm.backend "$tmp/out")"
  /usr/bin/python3 - "$tmp/run.json" <<'PY' || fail "run.json mesh"
import json, sys
r = json.load(open(sys.argv[1]))
m = r["mesh"]
assert m == {"world": 4, "tp": 2, "pp": 1, "dp": 2, "tp_groups": [[0, 1], [2, 3]],
             "dp_groups": [[0, 2], [1, 3]], "pp_groups": [[0], [1], [2], [3]]}, m
c = r["platform"]["comm"]
assert (c["backend"], c["requested"], c["reason"]) == ("mpi", "auto", "no NCCL in this build"), c
assert c["communicator"].rstrip(")").endswith("mpi") and r["config"]["comm"]["backend"] == "mpi", (c, r["config"]["comm"])
PY
  # shellcheck disable=SC2086
  expect nonzero "does not divide the 4 ranks" -- "$mpiexec" -n 4 $mpiflags "$kformer" "$src/input/tiny.yaml" parallel.tp=3 parallel.pp=1 model.n_heads=6 model.d_model=96
  # shellcheck disable=SC2086
  expect nonzero "comm.backend=self runs one rank" -- "$mpiexec" -n 2 $mpiflags "$kformer" "$src/input/tiny.yaml" comm.backend=self
  # A learning rate that blows up: the non-finite iterations are skipped and counted on every
  # rank, then train.max_nan in a row stop the run with one line and exit code 3.
  # shellcheck disable=SC2086
  "$mpiexec" -n 2 $mpiflags "$kformer" "$src/input/tiny.yaml" train.lr=1e6 train.steps=20 train.max_nan=3 \
    >"$tmp/nan.out" 2>"$tmp/nan.err"
  rc=$?
  [ $rc -eq 3 ] || fail "lr=1e6 should stop with exit code 3, got $rc"
  grep -q "number of nan iterations:   3" "$tmp/nan.out" || fail "lr=1e6: the NaN counter did not reach 3"
  [ "$(grep -c "kformer: error" "$tmp/nan.err")" -eq 1 ] || { fail "lr=1e6: the stop should be reported once"; cat "$tmp/nan.err"; }
  grep -q "train.max_nan=3" "$tmp/nan.err" || fail "lr=1e6: the message should name train.max_nan"
  # shellcheck disable=SC2086
  "$mpiexec" -n 4 $mpiflags "$kformer" "$src/input/tiny.yaml" parallel.tp=3 2>"$tmp/err4" >/dev/null
  n=$(grep -c "kformer: error" "$tmp/err4")
  [ "$n" -eq 1 ] || { fail "a bad deck on 4 ranks should be reported once, got $n times"; cat "$tmp/err4"; }
  [ $fails -eq 0 ] && echo "cli (multi-rank): all checks passed"
  exit $((fails > 0))
fi

expect 0 "Kokkos:" -- "$kformer" --version
expect 0 "model.n_layers = 2" -- "$kformer" --keys
expect 0 "tp groups [[0]]" -- "$kformer" "$src/input/tiny.yaml"
# Kokkos' own arguments are never rejected (either spelling of the threads flag).
expect 0 "resolved configuration" -- "$kformer" "$src/input/tiny.yaml" --kokkos-threads=1
expect nonzero "did you mean 'model.n_layers'?" -- "$kformer" "$src/input/tiny.yaml" model.n_laeyrs=2
expect nonzero "parallel.tp=3 does not divide model.n_heads=4" -- "$kformer" "$src/input/tiny.yaml" parallel.tp=3
expect nonzero "model.n_layers='two' is not valid" -- "$kformer" "$src/input/tiny.yaml" model.n_layers=two
expect nonzero "cannot read deck" -- "$kformer" "$tmp/missing.yaml"
# kernels.attention=auto: every kind this build runs is timed and named with its rate, and the
# memory estimate printed is the chosen kind's (naive and batched_gemm keep B*H*T*T probabilities,
# fused does not); under a memory.limit_gb only fused fits, auto times it alone and takes it.
long=(model.max_seq_len=512 train.seq_len=512 kernels.gemm=native --dry-run)
expect 0 "kernels.attention" -- "$kformer" "$src/input/tiny.yaml" kernels.attention=auto "${long[@]}"
chosen=$(sed -n 's/^  kernels\.attention *= auto -> \([a-z_]*\) (fp32 fwd+bwd TFLOP\/s: naive [0-9.e+-]*, fused [0-9.e+-]*.* at B=[0-9]* T=512 heads=.*/\1/p' "$tmp/out")
if [ -z "$chosen" ]; then
  fail "auto attention line: $(grep kernels.attention "$tmp/out")"
else
  estimate=$(grep "memory estimate" "$tmp/out")
  expect 0 "memory estimate" -- "$kformer" "$src/input/tiny.yaml" kernels.attention="$chosen" "${long[@]}"
  [ "$estimate" = "$(grep "memory estimate" "$tmp/out")" ] || fail "auto -> $chosen printed another estimate: $estimate"
fi
expect 0 "kernels.attention" -- "$kformer" "$src/input/tiny.yaml" kernels.attention=auto memory.limit_gb=0.05 "${long[@]}"
grep -qE '^  kernels\.attention += auto -> fused \(fp32 fwd\+bwd TFLOP/s: fused [0-9.e+-]+ at ' "$tmp/out" ||
  fail "auto under memory.limit_gb=0.05 (only fused fits): $(grep kernels.attention "$tmp/out")"
# cuDNN's flash attention: bf16 only, and only where the build has it (docs/bad-input.md has both lines).
expect nonzero "runs bf16 only" -- "$kformer" "$src/input/tiny.yaml" kernels.attention=vendor --dry-run
# Combinations of the memory and schedule features that cannot work together, named.
expect nonzero "parallel.sequence_parallel=true needs parallel.tp > 1" -- "$kformer" "$src/input/tiny.yaml" \
  parallel.sequence_parallel=true --dry-run
expect nonzero "train.recompute=full with parallel.schedule=zb-h1" -- "$kformer" "$src/input/tiny.yaml" \
  train.recompute=full parallel.schedule=zb-h1 --dry-run
expect nonzero "train.recompute='some' is not valid" -- "$kformer" "$src/input/tiny.yaml" train.recompute=some
expect nonzero "no deck given" -- "$kformer"
# Hostile input (issue 9): exit code 2 and exactly one line on stderr, naming the cause. The full
# list, with each message, is docs/bad-input.md (checked by the bad_input_table test).
refuse() {  # refuse PATTERN -- command...
  local pattern=$1; shift 2
  timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  [ $rc -eq 2 ] || { fail "$*: exit $rc, expected 2"; cat "$tmp/err"; return; }
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { fail "$*: expected one line on stderr, got:"; cat "$tmp/err"; return; }
  grep -qF -- "$pattern" "$tmp/err" || { fail "$*: stderr lacks '$pattern'"; cat "$tmp/err"; }
}
printf 'model:\n  n_layers: 2\n  n_layers: 3\n' >"$tmp/dup.yaml"
refuse "'model.n_layers' is set twice (lines 2 and 3)" -- "$kformer" "$tmp/dup.yaml" --dry-run
: >"$tmp/empty.yaml"
refuse "is empty" -- "$kformer" "$tmp/empty.yaml" --dry-run
refuse "is a directory" -- "$kformer" "$tmp" --dry-run
printf 'model:\0\1\2' >"$tmp/binary.yaml"
refuse "NUL byte" -- "$kformer" "$tmp/binary.yaml" --dry-run
printf ',\n' >"$tmp/comma.yaml"   # yaml-cpp 0.7's LoadAll allocates without end on this
refuse "a value cannot start with ','" -- "$kformer" "$tmp/comma.yaml" --dry-run
printf 'a: 1\n---\nb: 2\n' >"$tmp/two.yaml"
refuse "more than one YAML document" -- "$kformer" "$tmp/two.yaml" --dry-run
printf 'model:\n  n_layers: {a: 1}\n' >"$tmp/map.yaml"
refuse "map.yaml line 2: model.n_layers takes an integer in [1, 1024], not a map" -- "$kformer" "$tmp/map.yaml" --dry-run
refuse "unknown key 'model.n_lay\x0aers'" -- "$kformer" "$src/input/tiny.yaml" $'model.n_lay\ners=2'
refuse "model.n_layers='0x10' is not valid" -- "$kformer" "$src/input/tiny.yaml" model.n_layers=0x10
refuse "train.lr='nan' is not valid" -- "$kformer" "$src/input/tiny.yaml" train.lr=nan
refuse "expected an integer in [1, 1048576]" -- "$kformer" "$src/input/tiny.yaml" model.d_model=2000000000
refuse "train.steps='3000000000' is not valid" -- "$kformer" "$src/input/tiny.yaml" train.steps=3000000000
refuse "pipeline steps per iteration exceed" -- "$kformer" "$src/input/tiny.yaml" train.global_batch=16777216 train.micro_batch=1
refuse "GB per rank of this node" -- "$kformer" "$src/input/tiny.yaml" model.d_model=1048576 model.vocab_size=16777216
refuse "contains a control character" -- "$kformer" "$src/input/tiny.yaml" $'output.json=a\nb.json'
# ... and Kokkos' own arguments still pass, anywhere on the line.
expect 0 "resolved configuration" -- "$kformer" --kokkos-threads=1 "$src/input/tiny.yaml" --dry-run --kokkos-num-threads=1
# comm.backend=auto, the default, says what it chose and why; a named backend is printed as given.
expect 0 "comm.backend" -- "$kformer" "$src/input/tiny.yaml" --dry-run
grep -qE '^  comm\.backend += auto -> (mpi|self|nccl) \([a-zA-Z]' "$tmp/out" || fail "no 'comm.backend = auto -> ...' line: $(grep comm.backend "$tmp/out")"
expect 0 "resolved configuration" -- "$kformer" "$src/input/tiny.yaml" --dry-run comm.backend=self
grep -qE '^  comm\.backend += self +\(command line\)$' "$tmp/out" || fail "comm.backend=self: $(grep comm.backend "$tmp/out")"
# A kernels.gemm the deck sets is the one the run uses, whatever auto would take (figures_test
# checks auto); the start-up print shows the value alone.
for g in native vendor; do
  "$kformer" "$src/input/tiny.yaml" train.steps=1 kernels.gemm=$g output.json="$tmp/gemm.json" >"$tmp/gemm.out" 2>&1 ||
    fail "kernels.gemm=$g: the run failed"
  /usr/bin/python3 -c 'import json, sys
k = json.load(open(sys.argv[1]))["summary"]["kernels_gemm"]
sys.exit(0 if k["setting"] == k["impl"] == sys.argv[2] else 1)' "$tmp/gemm.json" $g ||
    fail "kernels.gemm=$g: the report's kernels_gemm is not $g"
  grep -qE "^  kernels\.gemm += $g +\(command line\)$" "$tmp/gemm.out" || fail "kernels.gemm=$g: the start-up print differs"
done

# Every deck key is documented in the user guide's key table (the guide must follow the schema).
"$kformer" --keys | grep -v '^ ' | cut -d' ' -f1 | while read -r key; do
  grep -qF "\`$key\`" "$src/docs/user-guide.md" || echo "$key"
done >"$tmp/undocumented"
[ -s "$tmp/undocumented" ] && fail "keys missing from docs/user-guide.md: $(tr '\n' ' ' <"$tmp/undocumented")"
# Bad input gives exactly one line on stderr.
"$kformer" "$src/input/tiny.yaml" model.n_laeyrs=2 2>"$tmp/err1" >/dev/null
[ "$(wc -l <"$tmp/err1")" -eq 1 ] || { fail "an unknown key should print one line, got:"; cat "$tmp/err1"; }

[ $fails -eq 0 ] && echo "cli: all checks passed"
exit $((fails > 0))
