#!/usr/bin/env bash
# Sends SIGNAL (default USR1) to PID after SECONDS, unless PID has ended: the early walltime
# warning for batch systems that give none (PBS), so that kformer can checkpoint and stop cleanly.
#   walltime_signal.sh PID SECONDS [SIGNAL]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: walltime_signal.sh PID SECONDS [SIGNAL]" >&2; exit 2; }
pid=$1 secs=$2 sig=${3:-USR1}
[ "$secs" -gt 0 ] 2>/dev/null || { echo "walltime_signal.sh: SECONDS must be a positive integer, not '$secs'" >&2; exit 2; }
end=$(( $(date +%s) + secs ))
while [ "$(date +%s)" -lt "$end" ]; do
  kill -0 "$pid" 2>/dev/null || exit 0
  sleep 1
done
kill -0 "$pid" 2>/dev/null || exit 0
echo "walltime_signal.sh: sending SIG$sig to $pid" >&2
kill -"$sig" "$pid"
