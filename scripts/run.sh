#!/usr/bin/env bash
# The main job on this machine: set-up if needed, build the default preset, run a deck under
# mpirun on 4 ranks (one per core on a machine with fewer cores; KFORMER_NP to choose) and print
# the report. Each phase says what it does on stderr; SIGTERM or Ctrl-C stops the run cleanly
# (kformer_mpirun in common.sh).
#   scripts/run.sh                       input/tiny.yaml on 4 ranks
#   scripts/run.sh input/gpt3-small.yaml parallel.tp=2 train.steps=3
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

deck=${1:-$top/input/tiny.yaml}
[ $# -gt 0 ] && shift
# More ranks than cores take turns on them (Kokkos warns so, once per rank): only when asked.
np=${KFORMER_NP:-$(kformer_ranks 4)}

mkdir -p "$top/build"
kformer_configure default
kformer_build default kformer
report=$top/build/report.json
args=("$@")
printf '%s\n' "${args[@]+"${args[@]}"}" | grep -q '^output.json=' || args+=("output.json=$report")
note="" cores=$(nproc 2>/dev/null || echo 1)
[ -n "${KFORMER_NP:-}" ] || [ "$np" -ge 4 ] || note=", one per core (KFORMER_NP=4 for 4)"
[ "$np" -le "$cores" ] || note=" on $cores cores: they take turns, which Kokkos warns about once per rank"
echo "run: kformer on $np MPI rank(s)$note" >&2
kformer_mpirun "$np" "$top/build/default/bin/kformer" "$deck" "${args[@]}"
for a in "${args[@]}"; do
  case "$a" in output.json=*) echo "report: ${a#output.json=}" ;; esac
done
