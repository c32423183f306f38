#!/usr/bin/env bash
# Every pipeline schedule (gpipe, 1f1b, zb-h1 and interleaved on 2 and 4 stages; zb-h1 also
# with sequence parallelism over tp=2) under NCCL's rules with messages above NCCL's buffering:
# comm.strict=true (rendezvous sends, one stream per process) and activations of 260x32x128 floats
# (4.06 MiB; under sequence parallelism each TP rank sends its half, 2.03 MiB) per micro-batch.
# d_model 128 over 32 tokens rather than 64 over 64: the same bytes per message from half the
# tokens, whose per-token work (not the GEMMs) is most of a step here (one-rank run: 12.0 -> 7.8 s
# CPU; the start-up GEMM ceiling, timed at the layer shape, grows, so the test gains 18%).
# Each layout must finish (an exchange that deadlocked under NCCL would deadlock here and the
# watchdog would end it) and give the one-rank losses and gradient norms (within the bounds of
# same_training.py).
#   pipeline_strict_test.sh KFORMER SOURCE_DIR MPIEXEC "MPIEXEC_FLAGS"
set -u
kformer=$1; src=$2; mpiexec=$3; mpiflags=$4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
big=(comm.strict=true comm.timeout_s=60 model.n_layers=4 model.d_model=128 model.max_seq_len=32 train.seq_len=32
     train.micro_batch=260 train.global_batch=1040 train.steps=2)

run() {  # name ranks overrides...
  local name=$1 np=$2; shift 2
  # shellcheck disable=SC2086  # the flags are a list
  if ! "$mpiexec" -n "$np" $mpiflags "$kformer" "$src/input/tiny.yaml" "${big[@]}" output.json="$tmp/$name.json" "$@" \
      >"$tmp/$name.log" 2>&1; then
    echo "FAIL: $name ($*) did not finish:"; tail -5 "$tmp/$name.log"; fails=$((fails + 1)); return 1
  fi
}

compare() {  # base name: losses and gradient norms (same_training.py)
  /usr/bin/python3 "$src/tests/miniapp/same_training.py" "$tmp/$1.json" "$tmp/$2.json" "$2" || fails=$((fails + 1))
}

# The two one-rank references (one core each) side by side; `run` said why either failed.
run one8 1 model.n_layers=8 & one8=$!
run one 1; one_ok=$?
wait $one8; one8_ok=$?
[ $one8_ok -eq 0 ] || fails=$((fails + 1))
[ $one_ok -eq 0 ] || exit 1
grep -Eq "comm.strict += true" "$tmp/one.log" || { echo "FAIL: the deck does not say comm.strict = true"; exit 1; }
for layout in "pp=2 schedule=gpipe" "pp=2 schedule=1f1b" "pp=2 schedule=interleaved virtual_stages=2" \
              "pp=4 schedule=gpipe" "pp=4 schedule=1f1b" "pp=2 dp=2 schedule=1f1b" "pp=4 schedule=zb-h1" \
              "pp=2 tp=2 sequence_parallel=true schedule=zb-h1"; do
  args=() np=1
  for kv in $layout; do
    args+=("parallel.$kv")
    case $kv in pp=* | dp=* | tp=*) np=$((np * ${kv#*=})) ;; esac
  done
  name=${layout// /-}
  run "$name" "$np" "${args[@]}" && compare one "$name"
done
# Interleaved on 4 stages needs 8 chunks: an 8-layer model against its own one-rank run.
if [ $one8_ok -eq 0 ]; then
  run pp=4-interleaved 4 model.n_layers=8 parallel.pp=4 parallel.schedule=interleaved parallel.virtual_stages=2 &&
    compare one8 pp=4-interleaved
fi
[ $fails -eq 0 ] && echo "pipeline_strict: every schedule finished under comm.strict with 4.06 MiB messages and the one-rank losses"
exit $((fails > 0))
