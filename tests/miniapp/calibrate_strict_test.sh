#!/usr/bin/env bash
# kformer calibrate's communicator is a run's (issue 24): on 2 ranks under comm.strict=true it is
# strict(mpi) and every buffer calibrate hands it passes NCCL's rules (a host buffer would stop it
# with a comm.strict line); with comm.strict=false the same command gets plain mpi, so the
# decorator comes from the deck and not by chance. The start-up line says which backend
# comm.backend=auto chose and why.
#   calibrate_strict_test.sh KFORMER SOURCE_DIR MPIEXEC "MPIEXEC_FLAGS"
set -u
kformer=$1; src=$2; mpiexec=$3; mpiflags=$4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck source=tests/support/calibrated.sh
. "$src/tests/support/calibrated.sh"

calibrate() {  # name overrides...
  local name=$1; shift
  # shellcheck disable=SC2086  # the flags are a list
  calibrated "$tmp/$name.log" "$mpiexec" -n 2 $mpiflags "$kformer" calibrate "$src/input/tiny.yaml" \
    predict.machine="$tmp/$name.yaml" "$@" || { tail -5 "$tmp/$name.log"; fail "calibrate $* exited non-zero"; }
  [ -s "$tmp/$name.yaml" ] || fail "calibrate $* wrote no profile"
}

calibrate strict comm.strict=true comm.timeout_s=120
grep -q '^kformer calibrate: 2 rank(s), comm strict(mpi) (comm.backend = auto -> mpi (no NCCL in this build))' \
  "$tmp/strict.log" || fail "under comm.strict=true: $(head -1 "$tmp/strict.log")"
grep -qF 'comm.strict:' "$tmp/strict.log" && fail "a comm.strict refusal: $(grep -F comm.strict: "$tmp/strict.log")"
calibrate loose comm.strict=false
grep -q '^kformer calibrate: 2 rank(s), comm mpi (' "$tmp/loose.log" || fail "under comm.strict=false: $(head -1 "$tmp/loose.log")"
echo "calibrate_strict: ok"
