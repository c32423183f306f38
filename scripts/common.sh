# shellcheck shell=bash
# Sourced by run.sh and test.sh: set-up when needed, then configure and build a preset, each phase
# reported in one line on stderr (the build's progress as it goes, the full logs in build/); and
# kformer_mpirun, the local launch.
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/wait_launcher.sh
source "$top/scripts/wait_launcher.sh"

# Seconds since $1 (date +%s), as "12 s" or "4 min 05 s".
kformer_took() {
  local s=$(( $(date +%s) - $1 ))
  if [ $s -lt 60 ]; then echo "$s s"; else printf '%d min %02d s' $((s / 60)) $((s % 60)); fi
}

# The Kokkos install the preset points at; a user's Kokkos_ROOT overrides it.
kformer_configure() {  # $1 = preset
  local preset=$1 extra=() setup=() arch=${KFORMER_CUDA_ARCH:-} t0
  # The preset names the Kokkos setup.sh must provide: cuda = 3.4.01 CUDA for AMPERE80,
  # cuda-<arch> for another arch, kokkos46 = 4.6.01 OpenMP+Serial, kokkos46-cuda[-<arch>] = 4.6.01 CUDA.
  case "$preset" in
    cuda) setup+=(--cuda); arch=AMPERE80 ;;
    cuda-*) setup+=(--cuda); arch=$(echo "${preset#cuda-}" | tr '[:lower:]' '[:upper:]') ;;
    kokkos46) setup+=(--kokkos 4.6.01) ;;
    kokkos46-cuda) setup+=(--cuda --kokkos 4.6.01); arch=AMPERE80 ;;
    kokkos46-cuda-*) setup+=(--cuda --kokkos 4.6.01); arch=$(echo "${preset#kokkos46-cuda-}" | tr '[:lower:]' '[:upper:]') ;;
  esac
  t0=$(date +%s)
  KFORMER_CUDA_ARCH=$arch "$top/scripts/setup.sh" "${setup[@]}"
  echo "setup: Debian packages and Kokkos ready ($(kformer_took "$t0"))" >&2
  [ -n "${Kokkos_ROOT:-}" ] && extra+=("-DKokkos_ROOT=$Kokkos_ROOT")
  # A configure that failed leaves CMakeCache.txt behind: the generated build system (Makefile or
  # build.ninja, written last) is what says a configure completed.
  local b=$top/build/$preset
  if { [ ! -f "$b/Makefile" ] && [ ! -f "$b/build.ninja" ]; } || [ ${#extra[@]} -gt 0 ]; then
    echo "configure: preset $preset into build/$preset (log: build/$preset.configure.log) ..." >&2
    t0=$(date +%s)
    mkdir -p "$top/build"
    (cd "$top" && cmake --preset "$preset" "${extra[@]}" >"$top/build/$preset.configure.log" 2>&1) || {
      cat "$top/build/$preset.configure.log" >&2
      echo "kformer: configure of preset '$preset' failed (log above)" >&2; exit 1; }
    echo "configure: done ($(kformer_took "$t0"))" >&2
  else
    echo "configure: build/$preset is configured" >&2
  fi
}

kformer_build() {  # $1 = preset, rest = targets (none: all)
  local preset=$1; shift
  local targets=() what=${*:-everything} t0 rc
  for t in "$@"; do targets+=(--target "$t"); done
  local log=$top/build/$preset.build.log
  t0=$(date +%s)
  # The compiler's progress on stderr as it goes (build_progress.sh); every line in the log.
  { (cd "$top" && cmake --build --preset "$preset" "${targets[@]}" 2>&1) |
      "$top/scripts/build_progress.sh" "build: $what" "$log"; rc=${PIPESTATUS[0]}; } || true
  if [ "$rc" -ne 0 ]; then
    # The compiler's errors, else (make's own complaints carry no 'error') the log's end.
    { grep -E "error|Error" "$log" || tail -n 20 "$log"; } | head -40 >&2
    echo "kformer: build of preset '$preset' failed (full log: build/$preset.build.log)" >&2; exit 1
  fi
  if grep -qE '^\[[ 0-9/%]+\] (Building|Linking)' "$log"; then
    echo "build: $what built ($(kformer_took "$t0"); log: build/$preset.build.log)" >&2
  else
    echo "build: $what up to date" >&2
  fi
}

# The ranks this machine runs without sharing a core: at most $1, at least 1.
kformer_ranks() {
  local cores; cores=$(nproc 2>/dev/null || echo 1)
  echo $(( cores < $1 ? cores : $1 ))
}

# mpirun as this machine needs it: Open MPI's oversubscription (a 2-core machine) and root, and
# per rank OMP_NUM_THREADS = cores / ranks (at least 1; a user's OMP_NUM_THREADS wins) with
# OMP_PROC_BIND=false (Kokkos warns when it is unset; there is no binding to keep to).
#
# Walltime and interrupt signals: kformer stops cleanly on its first SIGTERM, SIGUSR1 or SIGINT
# (every rank finishes the iteration, saves, exits 0), but Open MPI's mpirun (4.1) answers SIGTERM,
# SIGINT or SIGHUP by killing the ranks: SIGCONT, then SIGTERM and SIGKILL odls_base_sigkill_timeout
# (1 s) apart, and exit 1. It forwards SIGUSR1 instead. So mpirun runs in a session of its own,
# where a terminal's Ctrl-C does not reach it (its ranks have process groups of their own), and
# SIGTERM, SIGINT or SIGHUP to this shell is handed on to mpirun as SIGUSR1: every rank saves and
# exits 0, and so does this function. A second signal is handed on too and ends the ranks at once.
kformer_mpirun() {
  local np=$1; shift
  local flags=() cores threads=${OMP_NUM_THREADS:-}
  cores=$(nproc 2>/dev/null || echo 1)
  [[ $threads =~ ^[1-9][0-9]*$ ]] || threads=$(( cores / np > 1 ? cores / np : 1 ))
  local env=(OMP_NUM_THREADS="$threads" OMP_PROC_BIND="${OMP_PROC_BIND:-false}")
  if ! mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    env "${env[@]}" mpirun -n "$np" "$@"
    return
  fi
  flags+=(--oversubscribe)
  [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
  # Open MPI binds each of 1 or 2 ranks to a single core: threads of a rank would share it.
  [ "$threads" -gt 1 ] && flags+=(--bind-to none)
  # setsid gives mpirun a session of its own; under job control (an interactive shell that
  # sourced this) a background job has its own process group already, and setsid would fork.
  local detach=(setsid)
  [[ $- == *m* ]] && detach=()
  env "${env[@]}" "${detach[@]}" mpirun -n "$np" "${flags[@]}" "$@" </dev/null &
  local pid=$! caught="" stops=0 saved sig r
  saved=$(trap -p TERM INT HUP)
  for sig in TERM INT HUP; do
    # shellcheck disable=SC2064  # the pid and the signal's name are fixed now
    trap "caught=1; kformer_mpirun_stop $sig $pid" "$sig"
  done
  kformer_wait_launcher "$pid" && r=0 || r=$?  # mpirun's own status, through the signals
  trap - TERM INT HUP
  eval "$saved"
  return "$r"
}

# kformer_mpirun's trap: hands SIG$1 on to mpirun ($2) as SIGUSR1. Counts in the caller's $stops.
kformer_mpirun_stop() {
  stops=$((stops + 1))
  if [ "$stops" -eq 1 ]; then
    echo "kformer_mpirun: SIG$1: handed on to mpirun as SIGUSR1: every rank finishes its iteration, saves (with checkpoint.save) and exits 0; a second signal stops them at once" >&2
  else
    echo "kformer_mpirun: SIG$1 again: handed on; the ranks stop at once, without a checkpoint" >&2
  fi
  kill -USR1 "$2" 2>/dev/null || true  # mpirun may have ended already (a trap must not fail under set -e)
}
