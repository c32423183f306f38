#!/usr/bin/env bash
# The same study on this machine (CPU, Kokkos OpenMP, mpirun), to try a sweep before submitting it.
#   jobscripts/local.sh                                   jobscripts/studies/local.json on 4 ranks
#   STUDY=jobscripts/studies/layouts.json NP=4 jobscripts/local.sh
#   DRY_RUN=1 jobscripts/local.sh                         print the launch lines, run nothing
# Builds the default preset when KFORMER_BIN is not given and build/default has no kformer.
# Results: build/results/local-<study>-<date>-<pid>/ (see jobscripts/study.sh).
set -euo pipefail

KFORMER_HOME=${KFORMER_HOME:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
# shellcheck source=jobscripts/study.sh
source "$KFORMER_HOME/jobscripts/study.sh"

NP=${NP:-4}
STUDY=${STUDY:-jobscripts/studies/local.json}
PYTHON=${PYTHON:-/usr/bin/python3}   # Debian's, which has numpy and matplotlib
RESULTS=${RESULTS:-$KFORMER_HOME/build/results}   # build/ is git-ignored: local tries leave no clutter

study_init local "$(date +%Y%m%d-%H%M%S)-$$" "$KFORMER_HOME/build/default/bin/kformer"
if [ ! -x "$KFORMER_BIN" ] && [ "$DRY_RUN" != 1 ]; then
  # shellcheck source=scripts/common.sh
  source "$KFORMER_HOME/scripts/common.sh"
  kformer_configure default
  kformer_build default kformer
fi
study_run "$NP" "$KFORMER_HOME/jobscripts/mpirun_local.sh" "$NP"
