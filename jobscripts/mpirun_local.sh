#!/usr/bin/env bash
# The local launcher prefix of a sweep: `mpirun_local.sh NP kformer DECK ...` runs mpirun with
# the flags this machine needs (scripts/common.sh: oversubscription, root, cores / ranks threads
# per rank; SIGTERM and Ctrl-C handed on to mpirun as SIGUSR1, so that every rank saves).
# It exists so that sweep.py, which starts plain commands, can reuse kformer_mpirun.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
[ $# -ge 2 ] || { echo "mpirun_local.sh: usage: mpirun_local.sh NP COMMAND [ARGS...]" >&2; exit 2; }
kformer_mpirun "$@"
