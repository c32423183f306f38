#!/usr/bin/env bash
# Condenses a CMake build's output for the person waiting on it: every line goes to LOG, and
# stderr shows only the progress (CMake's "[ 42%]" or Ninja's "[12/64]" and the file being
# compiled): one line rewritten in place on a terminal, a line per tenth of the build elsewhere
# (a CI log, a pipe). Compiler errors stay in LOG; the caller shows them when the build fails.
#   cmake --build ... 2>&1 | build_progress.sh LABEL LOG
# Prints nothing when nothing was compiled or linked; exits 0 (the caller reads the build's status).
set -uo pipefail
label=$1 log=$2
: >"$log"
tty=0; [ -t 2 ] && tty=1
shown=-10 worked=0
while IFS= read -r line; do
  printf '%s\n' "$line" >>"$log"
  pct="" what=""
  if [[ $line =~ ^\[\ *([0-9]+)%\]\ (Building|Linking)\ [A-Za-z+]+\ [a-z\ ]*(object|library|executable|shared\ library|static\ library)\ (.*)$ ]]; then
    pct=${BASH_REMATCH[1]} what=${BASH_REMATCH[4]}
  elif [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\ (Building|Linking)\ [A-Za-z+]+\ [a-z\ ]*(object|library|executable)\ (.*)$ ]]; then
    pct=$(( 100 * BASH_REMATCH[1] / BASH_REMATCH[2] )) what=${BASH_REMATCH[5]}
  fi
  [ -n "$pct" ] || continue
  worked=1
  # miniapp/CMakeFiles/kformer_app.dir/stage.cpp.o -> miniapp/model/stage.cpp
  what=${what/CMakeFiles\/*.dir\//}; what=${what%.o}
  if [ $tty -eq 1 ]; then
    printf '\r\033[K%s: %3d%% %s' "$label" "$pct" "$what" >&2
  elif [ "$pct" -ge $((shown + 10)) ]; then
    shown=$(( pct / 10 * 10 ))
    printf '%s: %3d%% %s\n' "$label" "$pct" "$what" >&2
  fi
done
[ $tty -eq 1 ] && [ $worked -eq 1 ] && printf '\r\033[K' >&2
exit 0
