#!/usr/bin/env bash
# Hung and dead ranks end the job instead of hanging until the walltime (comm.timeout_s).
#   watchdog_test.sh KFORMER SOURCE_DIR MPIEXEC "MPIEXEC_FLAGS"
# 1. A run with a small timeout is unaffected.
# 2. A rank that stops participating (SIGSTOP): the job exits with code 4 within the timeout plus
#    a margin, and a rank's watchdog names the operation that did not complete.
# 3. A rank killed with SIGKILL: the job exits non-zero promptly (the launcher's doing, with the
#    watchdog as the fallback where a launcher does not).
# Bounds are generous: 4 ranks share 2 loaded cores.
set -u
kformer=$1; src=$2; mpiexec=$3; mpiflags=${4:-}
tmp=$(mktemp -d)
pids_to_reap=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  for p in "${pids_to_reap[@]}"; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
now() { date +%s.%N; }
elapsed() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }  # le A B: A <= B

# launch NAME key=value...: starts the 4-rank job in the background; sets job_pid.
launch() {
  local name=$1; shift
  # shellcheck disable=SC2086  # the flags are a list
  "$mpiexec" -n 4 $mpiflags "$kformer" "$src/input/tiny.yaml" "$@" >"$tmp/$name.out" 2>&1 &
  job_pid=$!
  pids_to_reap+=("$job_pid")
}

# wait_for_iteration NAME SECONDS: until the job has logged an iteration (or died, or time is up).
wait_for_iteration() {
  local t0; t0=$(now)
  while le "$(elapsed "$t0")" "$2"; do
    grep -q "^ *iteration " "$tmp/$1.out" && return 0
    kill -0 "$job_pid" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

# rank_pid RANK: the pid of that rank of the job (Open MPI puts the rank in each process's
# environment; mpirun forks the ranks of a single-node job itself).
rank_pid() {
  local p
  for p in $(pgrep -P "$job_pid"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$p"; return 0
    fi
  done
  return 1
}

# wait_exit SECONDS: waits for the job; sets job_rc (or 'none' if it outlived SECONDS) and took.
wait_exit() {
  local t0; t0=$(now)
  while kill -0 "$job_pid" 2>/dev/null && le "$(elapsed "$t0")" "$1"; do sleep 0.1; done
  took=$(elapsed "$t0")
  if kill -0 "$job_pid" 2>/dev/null; then job_rc=none; else wait "$job_pid"; job_rc=$?; fi
}

# victim NAME RANK: once job NAME has logged an iteration, sets pid to its rank RANK's process
# (fails the test, with the job's output, and returns 1 when either does not happen).
victim() {
  if ! wait_for_iteration "$1" 60; then
    fail "the job did not log an iteration"; cat "$tmp/$1.out"; return 1
  fi
  pid=$(rank_pid "$2") || { fail "cannot find rank $2's process among mpirun's children"; return 1; }
}

steps=(train.steps=100000 output.log_every=1 parallel.tp=2)

# --- 1. a healthy run with a small timeout --------------------------------------------------
# shellcheck disable=SC2086
"$mpiexec" -n 4 $mpiflags "$kformer" "$src/input/tiny.yaml" comm.timeout_s=30 parallel.tp=2 train.steps=3 \
  >"$tmp/ok.out" 2>&1 || { fail "a healthy run with comm.timeout_s=30 failed"; cat "$tmp/ok.out"; }
grep -q "has not completed" "$tmp/ok.out" && fail "the watchdog fired in a healthy run"

# --- 2. a rank stops participating ----------------------------------------------------------
timeout_s=3
launch stop comm.timeout_s=$timeout_s "${steps[@]}"
if victim stop 1; then
  pids_to_reap+=("$pid")
  kill -STOP "$pid"
  wait_exit $((timeout_s + 30))
  echo "stopped rank 1: job exit code $job_rc after $took s (comm.timeout_s=$timeout_s)"
  if [ "$job_rc" = none ]; then
    fail "the job still runs $took s after rank 1 stopped (comm.timeout_s=$timeout_s)"
  else
    [ "$job_rc" -eq 4 ] || fail "expected exit code 4 (communication timeout), got $job_rc"
    le "$took" $((timeout_s + 10)) || fail "took $took s, more than timeout + 10 s"
    # Not before the timeout, by the watchdog's own clock: the test's clock starts when it sends
    # SIGSTOP, but on a loaded machine the peers may have been waiting on rank 1 before that.
  fi
  line=$(grep -m1 "has not completed after" "$tmp/stop.out")
  if [ -z "$line" ]; then
    fail "no watchdog line in the output"; tail -20 "$tmp/stop.out"
  else
    echo "$line"
    waited=$(echo "$line" | sed -E 's/.*has not completed after ([0-9.]+) s.*/\1/')
    le "$timeout_s" "$waited" || fail "the watchdog fired after $waited s, before the timeout ($timeout_s s)"
    echo "$line" | grep -Eq "^kformer: rank [0-9]+: [a-z_+]+ (of [0-9.]+ [KMG]?i?B \([a-z0-9 ]+\) )?.*on ((tp|dp|pp|world) group \[[0-9,.]+\] \([0-9]+ ranks?\))( \(called at [a-z_]+/[a-z_]+\.cpp:[0-9]+ in [A-Za-z_:]+\))? has not completed after [0-9.]+ s \(comm.timeout_s=$timeout_s\)" ||
      fail "the watchdog line does not name rank, operation, bytes and group: $line"
  fi
  # The stopped rank, continued by the launcher to be terminated, does not blame its peers.
  grep -q "^kformer: rank 1: .*has not completed" "$tmp/stop.out" && fail "the stopped rank 1 reported its peers as hung"
fi

# --- 3. a rank is killed --------------------------------------------------------------------
launch kill comm.timeout_s=$timeout_s "${steps[@]}"
if victim kill 2; then
  kill -9 "$pid"
  wait_exit 30
  echo "killed rank 2: job exit code $job_rc after $took s"
  if [ "$job_rc" = none ]; then
    fail "the job still runs $took s after rank 2 was killed"
  else
    [ "$job_rc" -ne 0 ] || fail "the job exited 0 after a rank was killed"
    le "$took" $((timeout_s + 10)) || fail "took $took s after the kill, more than timeout + 10 s"
  fi
  grep -Eq "rank 2 .*(signal 9|Killed)|has not completed after" "$tmp/kill.out" ||
    { fail "the output names neither the dead rank nor a stuck operation"; tail -20 "$tmp/kill.out"; }
fi

[ "$fails" -eq 0 ] && echo "watchdog_test: all passed"
exit "$fails"
