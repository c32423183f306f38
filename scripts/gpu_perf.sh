#!/usr/bin/env bash
# Measures kformer on a GPU machine against issue 19's targets, from the bundle
# scripts/gpu_bundle.sh built (build/gpu-bundle, or KFORMER_BUNDLE_DIR), in one command of under
# 10 minutes (KFORMER_PERF_BUDGET_S, default 540):
#   (a) kformer-kernel-bench: GEMM native against cuBLAS at the GPT-2 layer shapes (2048 tokens),
#       fp32 forward and backward, bf16 forward;
#   (b) kformer-kernel-bench: attention fused and naive at T=2048, forward and backward;
#   (c) kformer-kernel-bench: every memory-bound kernel against the copy bandwidth beside it;
#   (e) bench/attention_vs_sdpa.py: PyTorch SDPA at (b)'s shapes;
#   (d) bench/step_vs_torch_gpu.py: the GPT-2 124M training step (B 8, T 1024) of kformer against
#       PyTorch eager and torch.compile, fp32 then bf16;
# then scripts/gpu_perf_summary.py: one table with every target, its ratio and a verdict.
#
#   scripts/gpu_perf.sh [OUTDIR]                  on the GPU (device tool: carry ["build/gpu-bundle"])
#   scripts/gpu_perf.sh --host BINDIR [OUTDIR]    the same steps on this CPU at tiny shapes, with
#                                                 BINDIR's kformer and kformer-kernel-bench (the test)
# OUTDIR: $OUT when set (the device tool's), else build/gpu-perf. It receives 8 files (the device
# tool brings back at most 8): summary.md (the table and the figures behind it), summary.json,
# kernel_bench.json, sdpa.json, step_fp32.json, step_bf16.json, gpu_perf.log (every command with
# its output), nvidia-smi.txt. Exit 0 when every step ran (a target missed is a result, not an
# error), 1 when one failed or ran out of time, 2 when nothing could start.
# KFORMER_PERF_SKIP: kernel-bench parts to leave out (any of gemm attention memory, space-separated),
# KFORMER_STEP_ATTENTION: kformer's kernels.attention in (d) (default fused).
#
# The Python scripts come from the bundle (py/, copied by gpu_bundle.sh with the binaries, so
# both are of one commit) when it has them, else from this checkout; python3 is the machine's
# (on the GPU machine, the one with PyTorch; PYTHON overrides it).
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
host_bin=""
if [ "${1:-}" = "--host" ]; then
  [ -n "${2:-}" ] || { echo "gpu_perf: --host needs the folder of kformer and kformer-kernel-bench" >&2; exit 2; }
  host_bin=$(realpath -m "$2"); shift 2
fi
case "${1:-}" in -h|--help) sed -n '2,25p' "$0"; exit 0 ;; -*) echo "gpu_perf: unknown option '$1' (see --help)" >&2; exit 2 ;; esac
# shellcheck source=scripts/gpu_env.sh
source "$top/scripts/gpu_env.sh"
gpu_script_init gpu_perf "${1:-${OUT:-$top/build/gpu-perf}}" "${KFORMER_PERF_BUDGET_S:-540}"

summarize() {
  "$python" "$py/scripts/gpu_perf_summary.py" "$outdir" --steps "$steps" --md "$outdir/summary.md" \
    --json "$outdir/summary.json" ${1:+--error "$1"}
}

if [ -n "$host_bin" ]; then
  # The CPU test: tiny shapes, a few cases of each kind, this checkout's scripts.
  bin=$host_bin py=$top python=${PYTHON:-/usr/bin/python3} device=cpu T=128
  step_args=(--shape tiny --steps 3 --warmup 1 --rounds 2)
  sdpa_args=(--dtypes fp32 --reps 2 --warmup 1)
  filters=('^((gemm|matmul_bwd)/native|gemm_bf16/(native|vendor))/256x4096x1024/'
           '^attention(_bwd)?/(naive|fused)/T128/' '^layernorm(_bf16)?/fwd/2048x768/')
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_PROC_BIND=false
  say "host mode: $bin, tiny shapes on the CPU"
else
  python=${PYTHON:-python3} py=$top
  if ! kformer_gpu_env "$bundle" "$outdir"; then
    say "$gpu_env_error"
    [ -f "$bundle/py/scripts/gpu_perf_summary.py" ] && py=$bundle/py
    summarize "$gpu_env_error" >/dev/null 2>&1
    exit 2
  fi
  bin=$bundle/bin device=cuda T=2048
  [ -d "$bundle/py" ] && py=$bundle/py
  step_args=(--shape gpt2 --steps 10 --warmup 3 --rounds 2)
  sdpa_args=(--dtypes "fp32,bf16" --reps 20 --warmup 5)
  filters=('^(gemm|gemm_bf16|matmul_bwd)/(native|vendor)/2048x[0-9x]+/min_time'
           '^(attention(_bwd)?/(naive|fused|batched_gemm)/T2048[^/]*(/[^/]*)?|attention_bf16(_bwd)?/[a-z_]+/T[0-9]+)/min_time'
           '^((bias_bwd|layernorm|rmsnorm|gelu|swiglu|residual|rope|softmax)(_bf16)?|probe_one_lane)/')
fi
for f in "$bin/kformer" "$bin/kformer-kernel-bench"; do
  [ -x "$f" ] || { say "no $f: rebuild the bundle with scripts/gpu_bundle.sh (it builds kformer-kernel-bench too)"; exit 2; }
done
say "scripts from $py; $("$python" -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -n 1)"
cd "$top" || exit 2

# --- the measurements ------------------------------------------------------------------------------
deadline=$((SECONDS + budget))
# kformer-kernel-bench in three runs, each with its own time cap, merged into kernel_bench.json
# (what a run cut short had written is kept).
# The caps are for the default budget (540 s) and shrink with a smaller one, leaving the steps the
# same share.
parts=()
for i in 0 1 2; do
  part=(gemm attention memory) cap=($((150 * budget / 540)) $((60 * budget / 540)) $((100 * budget / 540))) what=("(a) GEMM native and cuBLAS" "(b) attention fused and naive"
    "(c) memory-bound kernels and the copy")
  case " ${KFORMER_PERF_SKIP:-} " in *" ${part[i]} "*) say "kernel-${part[i]} skipped (KFORMER_PERF_SKIP)"; continue ;; esac
  # A skipped GEMM part leaves its time to the attention (a third: at a 290 s budget its own 32 s
  # ended after one case on an H200, session 14) and the memory-bound cases (the longest list).
  case " ${KFORMER_PERF_SKIP:-} " in *" gemm "*)
    [ "$i" -eq 1 ] && cap[1]=$((cap[1] + cap[0] / 3))
    [ "$i" -eq 2 ] && cap[2]=$((cap[2] + cap[0] * 2 / 3)) ;;
  esac
  step "kernel-${part[i]}" bench "${cap[i]}" "${what[i]}" -- "$bin/kformer-kernel-bench" \
    "--benchmark_filter=${filters[i]}" --benchmark_out="$work/${part[i]}.json" --benchmark_out_format=json
  parts+=("$work/${part[i]}.json")
done
"$python" "$py/scripts/gpu_perf_summary.py" "$outdir" --merge-bench "${parts[@]}" >>"$logf" 2>&1 ||
  say "the kernel benchmark's reports could not be merged (log: gpu_perf.log)"
step sdpa python $((60 * budget / 540)) "(e) PyTorch SDPA at the attention cases' shapes" -- \
  "$python" "$py/bench/attention_vs_sdpa.py" --kernel-bench "$outdir/kernel_bench.json" --T "$T" \
  --device "$device" "${sdpa_args[@]}" --json "$outdir/sdpa.json"
for precision in fp32 bf16; do
  # Half of what is left for the first, all of it for the second; the script stops its rounds
  # (and cuts torch.compile) 15 s before the cap.
  left=$((deadline - SECONDS - 10))
  [ "$precision" = fp32 ] && left=$((left / 2))
  step "step-$precision" python "$left" "(d) the training step against PyTorch, $precision" -- \
    "$python" "$py/bench/step_vs_torch_gpu.py" --kformer "$bin/kformer" --device "$device" --precision "$precision" \
    --attention "${KFORMER_STEP_ATTENTION:-fused}" "${step_args[@]}" --budget-s $((left > 30 ? left - 15 : 15)) --json "$outdir/step_$precision.json"
done

# --- the table ---------------------------------------------------------------------------------------
echo
summarize | tee -a "$logf" || say "the summary failed (log: gpu_perf.log)"
failed=$(awk -F'\t' '$3 != 0' "$steps" | wc -l)
say "$(($(wc -l <"$steps") - failed)) step(s) ran, $failed did not; $outdir/summary.md"
[ "$failed" -eq 0 ]
