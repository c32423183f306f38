# shellcheck shell=bash disable=SC2154,SC2034  # the caller sets tool, logf, steps, deadline, budget and reads gpu_env_error
# Sourced by scripts/gpu_check.sh and scripts/gpu_perf.sh: what both do on the GPU machine before
# running the bundle (scripts/gpu_bundle.sh): find the GPU, check the bundle against the machine
# (glibc, CUDA's libraries), set up Open MPI as a singleton; and run budgeted, logged steps.
#
# The caller sets top (its checkout), calls gpu_script_init (tool: the prefix of its lines; logf:
# its log; steps: a TSV file, one line a step: name, kind, rc, seconds, note) and, before calling
# step, sets deadline (in $SECONDS).

say() { echo "$tool: $*"; echo "$tool: $*" >>"$logf"; }

# gpu_script_init TOOL OUTDIR BUDGET_S: sets the caller's tool, bundle (KFORMER_BUNDLE_DIR, else
# build/gpu-bundle), outdir (created), budget, logf (OUTDIR/TOOL.log, emptied), work (a temporary
# folder, removed at exit) and steps (work/steps.tsv, empty). $top: the checkout.
gpu_script_init() {
  tool=$1
  bundle=$(realpath -m "${KFORMER_BUNDLE_DIR:-$top/build/gpu-bundle}")
  outdir=$(realpath -m "$2")
  budget=$3
  mkdir -p "$outdir" || { echo "$tool: cannot create $outdir" >&2; exit 2; }
  logf=$outdir/$tool.log
  : >"$logf"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  steps=$work/steps.tsv
  : >"$steps"
}

# kformer_gpu_env BUNDLE OUTDIR: 0 when the bundle can run here (LD_LIBRARY_PATH and Open MPI's
# variables exported, nvidia-smi's output in OUTDIR/nvidia-smi.txt), else 1 with the reason in
# gpu_env_error.
kformer_gpu_env() {
  local bundle=$1 outdir=$2 listed gpus why
  gpu_env_error=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    listed=$(nvidia-smi -L 2>&1)
    { echo "$listed"; nvidia-smi 2>&1; } >"$outdir/nvidia-smi.txt"
    gpus=$(echo "$listed" | grep -c '^GPU ')
    why="nvidia-smi -L lists none"
  else
    gpus=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    why="no nvidia-smi, and /proc/driver/nvidia/gpus lists none"
  fi
  if [ "$gpus" -eq 0 ]; then
    gpu_env_error="no GPU on $(hostname) ($why): run this on the GPU machine, e.g. with the device tool: command 'scripts/$tool.sh', carry [\"build/gpu-bundle\"]"
    return 1
  fi
  say "$gpus GPU(s): $(grep -m1 '^GPU ' "$outdir/nvidia-smi.txt" 2>/dev/null)"

  if [ ! -f "$bundle/MANIFEST" ]; then
    gpu_env_error="no bundle at $bundle: build it on the build machine with scripts/gpu_bundle.sh, then carry build/gpu-bundle"
    return 1
  fi
  say "bundle: $(manifest arch), git $(manifest git)"
  local glibc_have glibc_need
  glibc_have=$(ldd --version 2>/dev/null | head -n 1 | grep -o '[0-9][0-9.]*$')
  glibc_need=$(manifest glibc)
  if [ -n "$glibc_need" ] && [ "$(printf '%s\n%s\n' "$glibc_need" "${glibc_have:-0}" | sort -V | head -n 1)" != "$glibc_need" ]; then
    gpu_env_error="this machine's glibc is ${glibc_have:-unknown}, the bundle needs $glibc_need: build the bundle on a system with glibc <= ${glibc_have:-unknown}"
    return 1
  fi

  # CUDA's own libraries are not in the bundle: the CUDA toolkit's, else those of PyTorch's wheels.
  local py_site d lib found extra="" known missing
  py_site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
  local cuda_dirs=("${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
  [ -n "$py_site" ] && for d in "$py_site"/nvidia/*/lib "$py_site"/nvidia/cu*/lib; do [ -d "$d" ] && cuda_dirs+=("$d"); done
  known=$(ldconfig -p 2>/dev/null | awk 'NR > 1 {print $1}')
  for lib in $(manifest cuda_libs); do
    grep -qxF "$lib" <<<"$known" && continue
    found=""
    for d in "${cuda_dirs[@]}"; do
      [ -e "$d/$lib" ] && { found=$d; break; }
    done
    if [ -z "$found" ]; then
      gpu_env_error="CUDA library $lib is neither known to ldconfig nor in ${cuda_dirs[*]}: install the CUDA toolkit or set CUDA_HOME"
      return 1
    fi
    case ":$extra:" in *":$found:"*) ;; *) extra=${extra:+$extra:}$found ;; esac
  done
  # cuDNN and NVRTC are opened at run time by kernels.attention=vendor (kernels/attention/attention_cudnn.cpp),
  # so ldd does not name them: put their directories on the path where they are found; without
  # them every other kernel still runs and `auto` leaves vendor out.
  local dl_missing=""
  for lib in libcudnn.so.9 libnvrtc.so.13; do
    grep -qxF "$lib" <<<"$known" && continue
    found=""
    for d in "${cuda_dirs[@]}"; do
      [ -e "$d/$lib" ] && { found=$d; break; }
    done
    if [ -z "$found" ]; then dl_missing+=" $lib"; continue; fi
    case ":$extra:" in *":$found:"*) ;; *) extra=${extra:+$extra:}$found ;; esac
  done
  [ -z "$dl_missing" ] || say "not found (kernels.attention=vendor will not run):$dl_missing"
  export LD_LIBRARY_PATH=${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  missing=$(ldd "$bundle/bin/kformer" | grep "not found")
  if [ -n "$missing" ]; then
    gpu_env_error="kformer lacks libraries here: $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')"
    return 1
  fi
  say "CUDA libraries from: ${extra:-the ldconfig cache}"

  # No MPI is installed there: the bundle's Open MPI runs each process as a singleton, without
  # mpirun or its orted daemon, loading its components and help texts from the bundle.
  export OMPI_MCA_ess_singleton_isolated=1
  export OMPI_MCA_mca_base_component_path=$bundle/lib/openmpi/components
  export OPAL_PKGDATADIR=$bundle/lib/openmpi/help
  export HWLOC_PLUGINS_PATH=$bundle/lib/openmpi/hwloc-plugins   # none: the machine's may not fit
  export OMPI_MCA_btl=self                                      # one process: no shared memory set-up
  export OMP_PROC_BIND=false
  return 0
}

manifest() { sed -n "s/^$1 //p" "$bundle/MANIFEST"; }

# step NAME KIND CAP_S NOTE -- command...: runs the command under `timeout`, at most CAP_S seconds
# and never past $deadline, its output into $logf; records it in $steps.
step() {
  local name=$1 kind=$2 cap=$3 note=$4; shift 5
  local left=$((deadline - SECONDS))
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt 10 ]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" 124 0 "skipped: the time budget (${budget} s) was spent" >>"$steps"
    say "$name skipped (time budget spent)"; return
  fi
  { echo; echo "=== $name: $*"; } >>"$logf"
  local t0=$SECONDS
  (timeout "$cap" "$@") >>"$logf" 2>&1  # a subshell: bash's own "Aborted" line goes to the log too
  local rc=$?
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" "$rc" "$((SECONDS - t0))" "$note" >>"$steps"
  if [ $rc -eq 0 ]; then say "$name passed ($((SECONDS - t0)) s)"
  elif [ $rc -eq 124 ]; then say "$name timed out after $cap s (log: $(basename "$logf"))"
  else say "$name FAILED, exit $rc (log: $(basename "$logf"))"; fi
}
