#!/usr/bin/env bash
# scripts/run.sh as a new user meets it (issue 24, item 7): one line per phase (setup, configure,
# build, run) on stderr, no Kokkos warning (its ranks fit the cores: one per core up to 4, or
# KFORMER_NP), the training and the report. Runs against build/default, which ctest has built.
#   usage: tests/jobscripts/run_sh_test.sh SOURCE_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$src/scripts/run.sh" "$src/input/tiny.yaml" train.steps=2 output.json="$tmp/report.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] || fail "run.sh exited $rc"
for phase in "setup: Debian packages and Kokkos ready" "configure: build/default is configured" \
             "build: kformer (up to date|built)" "run: kformer on [0-9]* MPI rank"; do
  grep -qE "^$phase" "$tmp/err" || fail "no '$phase' line on stderr"
done
if grep -q "Kokkos::.*WARNING" "$tmp/err" "$tmp/out"; then
  fail "a Kokkos warning:"; grep -h -A3 "Kokkos::.*WARNING" "$tmp/err" "$tmp/out" | head -8
fi
grep -q "iteration        2/       2" "$tmp/out" || fail "no log line of iteration 2"
{ grep -q "^report: $tmp/report.json" "$tmp/out" && [ -s "$tmp/report.json" ]; } || fail "no report at $tmp/report.json"
[ $fails -eq 0 ] || { echo "--- stderr:"; cat "$tmp/err"; exit 1; }
echo "run_sh: $(grep -c . "$tmp/err") lines on stderr, one per phase, no Kokkos warning:"
sed 's/^/  /' "$tmp/err"
