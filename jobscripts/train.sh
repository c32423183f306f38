# shellcheck shell=bash
# Sourced by polaris.pbs and perlmutter.slurm when MODE=train: one long training run that survives
# its walltime. It saves universal checkpoints under CHECKPOINTS, resumes from the newest one when
# the job is submitted again (at any layout), and turns the scheduler's warning into a clean stop:
#   Slurm: sbatch --signal=B:USR1@180 ...  (SIGUSR1 to this batch shell 180 s before the end)
#   PBS:   no early signal; SIGNAL_AT_S (default: the job's walltime minus SIGNAL_MARGIN_S, read
#          with qstat) starts a timer that sends SIGUSR1 (scripts/walltime_signal.sh).
# Either way the launcher (srun, mpiexec) gets SIGUSR1 and hands it to every rank: kformer finishes
# the iteration, saves, and exits 0. Knobs (environment, all optional):
#   DECK (input/gpt3-small.yaml)  TRAIN_SET (extra key=value overrides)  CHECKPOINTS (folder)
#   CHECKPOINT_EVERY (100)  SIGNAL_AT_S  SIGNAL_MARGIN_S (180)  DRY_RUN=1 (print, run nothing)

train_die() { echo "train: $*" >&2; exit 2; }

# Seconds from now until the walltime warning under PBS (empty when unknown).
train_pbs_signal_at() {
  local wall="${WALLTIME:-}"
  if [ -z "$wall" ] && [ -n "${PBS_JOBID:-}" ] && command -v qstat >/dev/null 2>&1; then
    wall=$(qstat -f "$PBS_JOBID" 2>/dev/null | sed -n 's/^ *Resource_List.walltime = //p')
  fi
  [ -n "$wall" ] || return 0
  local h m s
  IFS=: read -r h m s <<< "$wall"
  echo $(( 10#$h * 3600 + 10#$m * 60 + 10#${s:-0} - ${SIGNAL_MARGIN_S:-180} ))
}

train_run() {  # $1 site, $2 default binary, rest = launcher prefix (kformer and its arguments follow)
  local site=$1 bin=${KFORMER_BIN:-$2}; shift 2
  local deck=${DECK:-input/gpt3-small.yaml}
  case "$deck" in /*) ;; *) deck=$KFORMER_HOME/$deck ;; esac
  [ -f "$deck" ] || train_die "no deck at $deck: set DECK to a file under input/"
  local name; name=$(basename "$deck" .yaml)
  local out=${RESULTS:-$KFORMER_HOME/results}/$site-train-$name
  CHECKPOINTS=${CHECKPOINTS:-$out/checkpoints}
  local args=("$deck" checkpoint.save="$CHECKPOINTS" checkpoint.every="${CHECKPOINT_EVERY:-100}"
              output.json="$out/report-${SLURM_JOB_ID:-${PBS_JOBID:-$$}}.json")
  # A resubmitted job continues the run: the newest complete checkpoint, whatever layout wrote it.
  [ -f "$CHECKPOINTS/latest" ] && args+=(checkpoint.load="$CHECKPOINTS")
  local kv
  for kv in ${TRAIN_SET:-}; do args+=("$kv"); done
  echo "train: site=$site deck=$deck checkpoints=$CHECKPOINTS${SIGNAL_AT_S:+ signal in ${SIGNAL_AT_S} s}"
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "  \$ $* $bin ${args[*]}"
    return 0
  fi
  [ -x "$bin" ] || train_die "kformer binary not found at $bin: build it (README.md) or set KFORMER_BIN"
  mkdir -p "$out"
  "$@" "$bin" "${args[@]}" &
  local pid=$! timer="" caught=""
  # The scheduler's warning (or a user's scancel --signal / qsig) goes to the launcher as SIGUSR1.
  # (kill fails once the launcher has ended; a trap that fails ends the script under set -e)
  trap 'caught=1; echo "train: walltime signal: asking kformer to checkpoint and stop"; kill -USR1 $pid 2>/dev/null || true' USR1 TERM
  if [ -n "${SIGNAL_AT_S:-}" ]; then
    "$KFORMER_HOME/scripts/walltime_signal.sh" "$pid" "$SIGNAL_AT_S" USR1 &
    timer=$!
  fi
  local status=0
  # shellcheck source=scripts/wait_launcher.sh
  source "$KFORMER_HOME/scripts/wait_launcher.sh"
  kformer_wait_launcher "$pid" && status=0 || status=$?  # the launcher's own status, through the signals
  [ -n "$timer" ] && kill "$timer" 2>/dev/null
  trap - USR1 TERM
  echo "train: kformer exited with $status; checkpoints in $CHECKPOINTS (submit again to continue)"
  return "$status"
}
