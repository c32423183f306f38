#!/usr/bin/env bash
# comm.strict's rendezvous rule across ranks: two ranks that each send 8 MiB, then receive,
# outside a group (what NCCL deadlocks on) are stopped by the watchdog with a line naming the
# ranks and the call site; the same exchange without comm.strict completes (so the rule is what
# catches it); in one group it completes under comm.strict too.
#   strict_exchange_test.sh STRICT_EXCHANGE MPIEXEC "MPIEXEC_FLAGS"
set -u
exe=$1; mpiexec=$2; mpiflags=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

run() {  # run NAME ARGS...: sets rc; output in $tmp/NAME
  local name=$1; shift
  # shellcheck disable=SC2086  # the flags are a list
  timeout 60 "$mpiexec" -n 2 $mpiflags "$exe" "$@" >"$tmp/$name" 2>&1
  rc=$?
}

run deadlock ungrouped strict
if [ "$rc" -ne 4 ]; then fail "ungrouped exchange under comm.strict: exit $rc, expected the watchdog's 4"; cat "$tmp/deadlock"; fi
line=$(grep -m1 "has not completed after" "$tmp/deadlock")
echo "watchdog: $line"
echo "$line" | grep -Eq "rank [01]: send of 8(\.0+)? MiB \(float32\) to rank [01] on world group \[0,1\]" ||
  fail "the watchdog's line does not name the send and the ranks: '$line'"
echo "$line" | grep -q "called at comm/strict_exchange.cpp:" || fail "the watchdog's line does not name the caller: '$line'"

run loose ungrouped loose
[ "$rc" -eq 0 ] || { fail "ungrouped exchange without comm.strict: exit $rc (MPI buffers it)"; cat "$tmp/loose"; }

run grouped grouped strict
[ "$rc" -eq 0 ] || { fail "grouped exchange under comm.strict: exit $rc"; cat "$tmp/grouped"; }
[ "$(grep -c "exchange ok" "$tmp/grouped")" -eq 2 ] || fail "grouped exchange: data wrong or missing"

[ "$fails" -eq 0 ] && echo "strict_exchange: all cases passed"
exit $((fails > 0))
