# shellcheck shell=bash
# Sourced by polaris.pbs, perlmutter.slurm and local.sh: what is the same on every site. A site
# script sets KFORMER_HOME, its environment and its launcher prefix, then calls
#   study_init SITE JOBID DEFAULT_BINARY     (names the study, the binary and the output folder)
#   study_run RANKS LAUNCHER...              (sweep, then CSV and plots; DRY_RUN=1: print only)
# Knobs (environment, all optional):
#   STUDY          sweep spec (default jobscripts/studies/layouts.json), relative to KFORMER_HOME
#   KFORMER_BIN    the kformer binary;  PYTHON  interpreter with numpy+matplotlib (python3)
#   RESULTS        parent folder of the per-job output folder (KFORMER_HOME/results)
#   SWEEP_SET      extra key=value overrides for every point, space-separated
#   POINT_TIMEOUT  seconds before one point is killed (a hung point must not eat the allocation)
#   DRY_RUN=1      print the launch lines and decks, run nothing

study_die() { echo "study: $*" >&2; exit 2; }

study_init() {  # $1 site, $2 job id, $3 default binary
  local site=$1 job=$2
  STUDY=${STUDY:-jobscripts/studies/layouts.json}
  case "$STUDY" in /*) ;; *) STUDY=$KFORMER_HOME/$STUDY ;; esac
  [ -f "$STUDY" ] || study_die "no sweep spec at $STUDY: set STUDY to a file under jobscripts/studies/"
  KFORMER_BIN=${KFORMER_BIN:-$3}
  PYTHON=${PYTHON:-python3}
  DRY_RUN=${DRY_RUN:-0}
  local name
  name=$(basename "$STUDY"); name=${name%.*}
  # One folder per job id: reruns never overwrite an earlier job's reports.
  OUTDIR=${OUTDIR:-${RESULTS:-$KFORMER_HOME/results}/$site-$name-$job}
  STUDY_SITE=$site
}

# The variables a site script exported for the network stack, so a dry run shows them and a
# real run keeps them beside the results.
study_environment() {
  env | grep -E '^(NCCL|FI|MPICH|OMP|CUDA|KFORMER)_' | sort || true
}

study_run() {  # $1 total ranks, rest = launcher prefix (kformer and its arguments follow it)
  local ranks=$1; shift
  local sweep=("$PYTHON" "$KFORMER_HOME/scripts/sweep.py" "$STUDY" --ranks "$ranks"
               --bin "$KFORMER_BIN" --out "$OUTDIR")
  local kv
  for kv in ${SWEEP_SET:-}; do sweep+=(--set "$kv"); done
  [ -n "${POINT_TIMEOUT:-}" ] && sweep+=(--timeout "$POINT_TIMEOUT")
  echo "study: site=$STUDY_SITE ranks=$ranks spec=$STUDY"
  echo "study: binary=$KFORMER_BIN"
  echo "study: results=$OUTDIR"
  if [ "$DRY_RUN" = 1 ]; then
    study_environment | sed 's/^/env: /'
    "${sweep[@]}" --dry-run -- "$@"
    return
  fi
  [ -x "$KFORMER_BIN" ] || study_die "kformer binary not found at $KFORMER_BIN: build it (README.md, 'Building by hand, and at a site') or set KFORMER_BIN"
  mkdir -p "$OUTDIR"
  { "$KFORMER_BIN" --version 2>&1 || true; study_environment; } > "$OUTDIR/environment.txt"
  local status=0
  "${sweep[@]}" -- "$@" 2>&1 | tee "$OUTDIR/sweep.log" || status=$?
  # Collect even after failed points: the CSV records them, and the good ones still plot.
  "$PYTHON" "$KFORMER_HOME/scripts/collect.py" "$OUTDIR" --csv "$OUTDIR/results.csv" \
    --plots "$OUTDIR/plots" 2>&1 | tee -a "$OUTDIR/sweep.log" || status=$?
  echo "study: CSV $OUTDIR/results.csv, plots $OUTDIR/plots/"
  return "$status"
}
