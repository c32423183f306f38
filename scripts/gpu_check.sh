#!/usr/bin/env bash
# Runs on a GPU machine what only a GPU can check, from the bundle scripts/gpu_bundle.sh built
# (build/gpu-bundle, or KFORMER_BUNDLE_DIR): the CUDA kernel tests, the NCCL conformance suite on
# one rank, and two one-GPU training runs: input/tiny.yaml, then GPT-2 124M shapes (12 layers,
# d 768, 12 heads, vocab 50304, seq 1024; 5 steps of 8 sequences). The tiny run's iteration-1
# loss must match the CPU's (the host build's, carried in the bundle's MANIFEST) within 1e-5
# relative: step tiny-vs-cpu.
#
#   scripts/gpu_check.sh [OUTDIR]      OUTDIR: $OUT when set (the device tool's), else build/gpu-check
#
# Writes into OUTDIR five files (the device tool brings back at most 8):
#   gpu_check.json   one verdict per step (rc, seconds, test counts, losses), the GPU, the bundle
#   gpu_check.log    every command with its whole output
#   tiny.json, gpt2-124m.json   kformer's reports of the two runs
#   nvidia-smi.txt
# Exit 0 when every step passed, 1 when one failed, 2 when nothing could start (no GPU, no
# bundle, a library missing). KFORMER_CHECK_BUDGET_S (default 540) bounds the whole run: the
# device tool stops a command after 600 s.
#
# No MPI is installed there: the bundle's Open MPI runs each process as a singleton, without
# mpirun or its orted daemon (OMPI_MCA_ess_singleton_isolated=1), loading its components and
# help texts from the bundle.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=$(realpath -m "${KFORMER_BUNDLE_DIR:-$top/build/gpu-bundle}")
outdir=$(realpath -m "${1:-${OUT:-$top/build/gpu-check}}")
budget=${KFORMER_CHECK_BUDGET_S:-540}
mkdir -p "$outdir" || { echo "gpu_check: cannot create $outdir" >&2; exit 2; }
logf=$outdir/gpu_check.log
: >"$logf"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
steps=$work/steps.tsv
: >"$steps"

say() { echo "gpu_check: $*"; echo "gpu_check: $*" >>"$logf"; }
summary() {  # $1 = verdict line when nothing could start
  if ! KFORMER_CHECK_ERROR=${1:-} python3 - "$steps" "$work" "$outdir" "$bundle" >"$outdir/gpu_check.json" <<'PY'
import json, math, os, sys
steps_tsv, work, outdir, bundle = sys.argv[1:5]
out = {"error": os.environ.get("KFORMER_CHECK_ERROR") or None, "bundle": {}, "steps": []}
try:
    for line in open(os.path.join(bundle, "MANIFEST")):
        k, _, v = line.rstrip("\n").partition(" ")
        out["bundle"][k] = v
except OSError:
    pass
try:
    out["gpus"] = [l.strip() for l in open(os.path.join(outdir, "nvidia-smi.txt")) if l.startswith("GPU ")]
except OSError:
    out["gpus"] = []
for line in open(steps_tsv):
    name, kind, rc, seconds, note = line.rstrip("\n").split("\t")
    s = {"name": name, "kind": kind, "rc": int(rc), "seconds": float(seconds), "note": note}
    if kind == "gtest" and os.path.exists(os.path.join(work, name + ".json")):
        g = json.load(open(os.path.join(work, name + ".json")))
        s.update(tests=g.get("tests"), failures=g.get("failures"), disabled=g.get("disabled"),
                 failed=[f"{suite['name']}.{t['name']}" for suite in g.get("testsuites", [])
                         for t in suite.get("testsuite", []) if t.get("failures")])
    if kind == "kformer" and os.path.exists(os.path.join(outdir, name + ".json")):
        r = json.load(open(os.path.join(outdir, name + ".json")))
        s["losses"] = [it.get("loss") for it in r.get("iterations", [])]
        s["summary"] = {k: r.get("summary", {}).get(k) for k in ("step_ms_median", "tokens_per_s", "model_tflops_per_rank", "mfu")}
        s["platform"] = r.get("platform")
        if not s["losses"] or not all(isinstance(l, (int, float)) and math.isfinite(l) for l in s["losses"]):
            s["rc"] = s["rc"] or 1
            s["note"] += "; losses missing or not finite"
    out["steps"].append(s)
out["passed"] = [s["name"] for s in out["steps"] if s["rc"] == 0]
out["failed"] = [s["name"] for s in out["steps"] if s["rc"] != 0]
out["ok"] = not out["error"] and bool(out["steps"]) and not out["failed"]
json.dump(out, sys.stdout, indent=2)
PY
  then
    echo "{\"ok\": false, \"error\": \"python3 could not write the summary\"}" >"$outdir/gpu_check.json"
  fi
}
cannot_start() { say "$1"; summary "$1"; exit 2; }

# --- a GPU, the bundle, glibc, CUDA's libraries ------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1; then
  listed=$(nvidia-smi -L 2>&1)
  { echo "$listed"; nvidia-smi 2>&1; } >"$outdir/nvidia-smi.txt"
  gpus=$(echo "$listed" | grep -c '^GPU ')
  why="nvidia-smi -L lists none"
else
  gpus=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  why="no nvidia-smi, and /proc/driver/nvidia/gpus lists none"
fi
[ "$gpus" -gt 0 ] || cannot_start "no GPU on $(hostname) ($why): run this on the GPU machine, e.g. with the device tool: command 'scripts/gpu_check.sh', carry [\"build/gpu-bundle\"]"
say "$gpus GPU(s): $(grep -m1 '^GPU ' "$outdir/nvidia-smi.txt" 2>/dev/null)"

[ -f "$bundle/MANIFEST" ] || cannot_start "no bundle at $bundle: build it on the build machine with scripts/gpu_bundle.sh, then carry build/gpu-bundle"
manifest() { sed -n "s/^$1 //p" "$bundle/MANIFEST"; }
say "bundle: $(manifest arch), git $(manifest git)"
glibc_have=$(ldd --version 2>/dev/null | head -n 1 | grep -o '[0-9][0-9.]*$')
glibc_need=$(manifest glibc)
if [ -n "$glibc_need" ] && [ "$(printf '%s\n%s\n' "$glibc_need" "${glibc_have:-0}" | sort -V | head -n 1)" != "$glibc_need" ]; then
  cannot_start "this machine's glibc is ${glibc_have:-unknown}, the bundle needs $glibc_need: build the bundle on a system with glibc <= ${glibc_have:-unknown}"
fi

# CUDA's own libraries are not in the bundle: the CUDA toolkit's, else those of PyTorch's wheels.
py_site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
cuda_dirs=("${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
[ -n "$py_site" ] && for d in "$py_site"/nvidia/*/lib "$py_site"/nvidia/cu*/lib; do [ -d "$d" ] && cuda_dirs+=("$d"); done
extra=""
known=$(ldconfig -p 2>/dev/null | awk 'NR > 1 {print $1}')
for lib in $(manifest cuda_libs); do
  grep -qxF "$lib" <<<"$known" && continue
  found=""
  for d in "${cuda_dirs[@]}"; do
    [ -e "$d/$lib" ] && { found=$d; break; }
  done
  [ -n "$found" ] || cannot_start "CUDA library $lib is neither known to ldconfig nor in ${cuda_dirs[*]}: install the CUDA toolkit or set CUDA_HOME"
  case ":$extra:" in *":$found:"*) ;; *) extra=${extra:+$extra:}$found ;; esac
done
export LD_LIBRARY_PATH=${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
missing=$(ldd "$bundle/bin/kformer" | grep "not found")
[ -z "$missing" ] || cannot_start "kformer lacks libraries here: $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')"
say "CUDA libraries from: ${extra:-the ldconfig cache}"

# Open MPI from the bundle, as a singleton (see the header).
export OMPI_MCA_ess_singleton_isolated=1
export OMPI_MCA_mca_base_component_path=$bundle/lib/openmpi/components
export OPAL_PKGDATADIR=$bundle/lib/openmpi/help
export HWLOC_PLUGINS_PATH=$bundle/lib/openmpi/hwloc-plugins   # none: the machine's may not fit
export OMPI_MCA_btl=self                                      # one process: no shared memory set-up
export OMP_PROC_BIND=false

# --- the steps ---------------------------------------------------------------------------------
deadline=$((SECONDS + budget))
step() {  # step NAME KIND CAP_S NOTE -- command...
  local name=$1 kind=$2 cap=$3 note=$4; shift 5
  local left=$((deadline - SECONDS))
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt 10 ]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" 124 0 "skipped: KFORMER_CHECK_BUDGET_S=$budget spent" >>"$steps"
    say "$name skipped (time budget spent)"; return
  fi
  { echo; echo "=== $name: $*"; } >>"$logf"
  local t0=$SECONDS
  (timeout "$cap" "$@") >>"$logf" 2>&1  # a subshell: bash's own "Aborted" line goes to the log too
  local rc=$?
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" "$rc" "$((SECONDS - t0))" "$note" >>"$steps"
  if [ $rc -eq 0 ]; then say "$name passed ($((SECONDS - t0)) s)"
  elif [ $rc -eq 124 ]; then say "$name timed out after $cap s (log: gpu_check.log)"
  else say "$name FAILED, exit $rc (log: gpu_check.log)"; fi
}

for t in "$bundle"/bin/test_*; do
  name=$(basename "$t")
  step "$name" gtest 120 "" -- "$t" --gtest_output="json:$work/$name.json"
done
cd "$top" || exit 2
step start gpu 60 "kformer's GPU start-up lines" -- "$bundle/bin/kformer" input/tiny.yaml --dry-run
if ! grep -q "^  rank 0 on .*: GPU 0 of .*chosen by kformer" "$logf"; then  # kformer picked the GPU itself
  printf 'gpu-line\tgpu\t1\t0\tthe dry run printed no line "rank 0 on ...: GPU 0 of ... chosen by kformer"\n' >>"$steps"
  say "gpu-line FAILED: the dry run printed no GPU line for rank 0"
fi
step tiny kformer 120 "input/tiny.yaml, comm.backend=mpi (Open MPI singleton)" -- \
  "$bundle/bin/kformer" input/tiny.yaml comm.backend=mpi output.json="$outdir/tiny.json"
# The GPU's iteration-1 loss against the CPU's the bundle carries: within 1e-5 relative.
cpu_loss=$(manifest cpu_tiny_loss1)
verdict=$(python3 - "$outdir/tiny.json" "$cpu_loss" <<'PY' 2>&1
import json, sys
try:
    gpu = json.load(open(sys.argv[1]))["iterations"][0]["loss"]
    cpu = float(sys.argv[2])
except Exception as e:  # no run, or a bundle without the CPU loss
    print(f"1\tno comparison: {e}")
    sys.exit(0)
rel = abs(gpu - cpu) / abs(cpu)
print(f"{0 if rel <= 1e-5 else 1}\tGPU {gpu!r} vs CPU {cpu!r}: relative {rel:.2e} (limit 1e-5)")
PY
)
printf 'tiny-vs-cpu\tcompare\t%s\t0\t%s\n' "${verdict%%$'\t'*}" "${verdict#*$'\t'}" >>"$steps"
say "tiny-vs-cpu: ${verdict#*$'\t'}"
step gpt2-124m kformer 300 "GPT-2 124M shapes, comm.backend=nccl, vendor GEMM, fused attention" -- \
  "$bundle/bin/kformer" input/gpt3-small.yaml model.vocab_size=50304 model.max_seq_len=1024 \
  train.seq_len=1024 train.steps=5 train.global_batch=8 train.micro_batch=8 comm.backend=nccl \
  output.json="$outdir/gpt2-124m.json"

summary
failed=$(awk -F'\t' '$3 != 0' "$steps" | wc -l)
say "$(($(wc -l <"$steps") - failed)) step(s) passed, $failed failed; $outdir/gpu_check.json"
[ "$failed" -eq 0 ]
