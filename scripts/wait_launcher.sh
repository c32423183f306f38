# shellcheck shell=bash
# Sourced by scripts/common.sh (kformer_mpirun) and jobscripts/train.sh, which run a launcher in
# the background while their traps hand signals on to it.
#
# kformer_wait_launcher PID: returns the launcher's own exit status. A trapped signal ends `wait`
# early (status > 128), so it waits again; if the signal came just before a wait, that wait got the
# status and the next answers 127: the one before is kept. The caller's traps set `caught=1` (the
# caller's variable: bash scopes it dynamically).
kformer_wait_launcher() {
  local pid=$1 r last=""
  while :; do
    caught=""
    wait "$pid" 2>/dev/null && r=0 || r=$?
    if [ -z "$caught" ]; then
      [ "$r" -eq 127 ] && [ -n "$last" ] && r=$last
      return "$r"
    fi
    last=$r
  done
}
