# shellcheck shell=bash
# Sourced by the tests that run kformer calibrate. calibrate refuses a profile whose repeats
# disagree (calibrate.agreement): on a machine the suite shares between two tests that is a busy
# moment, not a fault. `calibrated LOG COMMAND...` runs the command, tries again (three tries in
# all) while it refuses for that reason, and reports the test as skipped (exit 77) when it never
# got a quiet moment; any other failure returns 1 with the log left for the caller.
calibrated() {
  local log=$1 try
  shift
  for try in 1 2 3; do
    "$@" >"$log" 2>&1 && return 0
    grep -q 'the repeats of .* disagree' "$log" || return 1
    echo "calibrate refused (try $try of 3): $(grep -o 'the repeats of .* disagree, [^:]*' "$log")"
  done
  echo "SKIPPED: calibrate refused three times on a busy machine"
  exit 77
}
