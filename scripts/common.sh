# shellcheck shell=bash
# Sourced by run.sh and test.sh: set-up when needed, then configure and build a preset.
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The Kokkos install the preset points at; a user's Kokkos_ROOT overrides it.
kformer_configure() {  # $1 = preset
  local preset=$1 extra=() setup=() arch=${KFORMER_CUDA_ARCH:-}
  # The preset names the Kokkos setup.sh must provide: cuda = 3.4.01 CUDA for AMPERE80,
  # cuda-<arch> for another arch, kokkos46 = 4.6.01 OpenMP+Serial.
  case "$preset" in
    cuda) setup+=(--cuda); arch=AMPERE80 ;;
    cuda-*) setup+=(--cuda); arch=$(echo "${preset#cuda-}" | tr '[:lower:]' '[:upper:]') ;;
    kokkos46) setup+=(--kokkos 4.6.01) ;;
  esac
  KFORMER_CUDA_ARCH=$arch "$top/scripts/setup.sh" "${setup[@]}"
  [ -n "${Kokkos_ROOT:-}" ] && extra+=("-DKokkos_ROOT=$Kokkos_ROOT")
  # A configure that failed leaves CMakeCache.txt behind: the generated build system (Makefile or
  # build.ninja, written last) is what says a configure completed.
  local b=$top/build/$preset
  if { [ ! -f "$b/Makefile" ] && [ ! -f "$b/build.ninja" ]; } || [ ${#extra[@]} -gt 0 ]; then
    (cd "$top" && cmake --preset "$preset" "${extra[@]}" >"$top/build/$preset.configure.log" 2>&1) || {
      mkdir -p "$top/build"; cat "$top/build/$preset.configure.log" >&2
      echo "kformer: configure of preset '$preset' failed (log above)" >&2; exit 1; }
  fi
}

kformer_build() {  # $1 = preset, rest = targets (none: all)
  local preset=$1; shift
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  (cd "$top" && cmake --build --preset "$preset" "${targets[@]}" >"$top/build/$preset.build.log" 2>&1) || {
    # The compiler's errors, else (make's own complaints carry no 'error') the log's end.
    { grep -E "error|Error" "$top/build/$preset.build.log" || tail -n 20 "$top/build/$preset.build.log"; } | head -40 >&2
    echo "kformer: build of preset '$preset' failed (full log: build/$preset.build.log)" >&2; exit 1; }
}

# mpirun with what Open MPI needs here: oversubscription on a 2-core machine, root allowed.
kformer_mpirun() {
  local np=$1; shift
  local flags=()
  if mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    flags+=(--oversubscribe)
    [ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
  fi
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_PROC_BIND=${OMP_PROC_BIND:-false} \
    mpirun -n "$np" "${flags[@]}" "$@"
}
