#!/usr/bin/env bash
# Measures kformer on a GPU machine against issue 19's and issue 35's targets, from the bundle
# scripts/gpu_bundle.sh built (build/gpu-bundle, or KFORMER_BUNDLE_DIR), in one command of under
# 10 minutes (KFORMER_PERF_BUDGET_S, default 540):
#   (f) kformer-kernel-bench: attention in bf16, every kind built (vendor = cuDNN first) at T 1024
#       and 2048 with 12 heads of 64 and 6 of 128, 8192 tokens, forward and backward (issue 35);
#   (a) kformer-kernel-bench: GEMM native against cuBLAS at the GPT-2 layer shapes (2048 tokens),
#       fp32 forward and backward, bf16 forward;
#   (b) kformer-kernel-bench: attention fused (and its CUDA-core shape where fp32 takes the tensor
#       cores), naive, batched_gemm at T=2048 in fp32, fwd and bwd;
#   (c) kformer-kernel-bench: every memory-bound kernel against the copy bandwidth beside it;
#   (e) bench/attention_vs_sdpa.py: PyTorch SDPA at (b)'s shapes, and in bf16 at (f)'s;
#   (d) bench/step_vs_torch_gpu.py: the GPT-2 124M training step (B 8, T 1024) of kformer against
#       PyTorch eager and torch.compile, fp32 then bf16, kformer with the decks' default choices
#       (kernels.attention=auto, kernels.gemm=auto: start-up timing picks; the report says which),
#       kformer's whole report kept beside (step_PRECISION_kformer.json: scripts/portability.py's input);
# then scripts/gpu_perf_summary.py: one table with every target, its ratio and a verdict.
#
#   scripts/gpu_perf.sh [OUTDIR]                  on the GPU (device tool: carry ["build/gpu-bundle"])
#   scripts/gpu_perf.sh --host BINDIR [OUTDIR]    the same steps on this CPU at tiny shapes, with
#                                                 BINDIR's kformer and kformer-kernel-bench (the test)
# OUTDIR: $OUT when set (the device tool's), else build/gpu-perf. It receives summary.md (the table
# and the figures behind it), summary.json, kernel_bench.json, sdpa.json, step_fp32.json,
# step_bf16.json, kformer's reports step_{fp32,bf16}_kformer.json, gpu_perf.log (every command with
# its output), nvidia-smi.txt: 10 files, more than the 8 the device tool brings back, so run it
# through scripts/gpu_session.sh, which packs them into one archive. Exit 0 when every step ran (a target missed is a result, not an
# error), 1 when one failed or ran out of time, 2 when nothing could start.
# KFORMER_PERF_SKIP: parts to leave out (any of attention_bf16 gemm attention memory sdpa steps,
# space-separated; a kernel-bench part's time goes to the steps, a skipped gemm's partly to attention
# and memory, a skipped fp32 attention's to the bf16 one; skipped steps leave the whole budget to the
# parts kept),
# KFORMER_STEP_ATTENTION, KFORMER_STEP_GEMM: kformer's kernels.attention and kernels.gemm in (d)
# (default auto, as the decks: the step measured is the one a user runs; name a kind to pin it).
# Issue 35 alone (vendor attention against SDPA, the step as the decks run it) in 300 s:
#   KFORMER_PERF_SKIP="gemm attention memory" KFORMER_PERF_BUDGET_S=300 scripts/gpu_perf.sh
# (f) then has up to 90 s, (e) 33, the two steps what is left (at least 167 s between them).
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
case "${1:-}" in -h|--help) sed -n '2,35p' "$0"; exit 0 ;; -*) echo "gpu_perf: unknown option '$1' (see --help)" >&2; exit 2 ;; esac
# shellcheck source=scripts/gpu_env.sh
source "$top/scripts/gpu_env.sh"
gpu_script_init gpu_perf "${1:-${OUT:-$top/build/gpu-perf}}" "${KFORMER_PERF_BUDGET_S:-540}"

summarize() {
  "$python" "$py/scripts/gpu_perf_summary.py" "$outdir" --steps "$steps" --md "$outdir/summary.md" \
    --json "$outdir/summary.json" ${1:+--error "$1"}
}

if [ -n "$host_bin" ]; then
  # The CPU test: tiny shapes, a few cases of each kind, this checkout's scripts (bf16 attention:
  # fused at both head sizes, naive at 64 only, the slowest of them on a CPU).
  bin=$host_bin py=$top python=${PYTHON:-/usr/bin/python3} device=cpu T=128
  step_args=(--shape tiny --steps 3 --warmup 1 --rounds 2)
  sdpa_args=(--dtypes fp32 --reps 2 --warmup 1)
  filters=('^attention_bf16(_bwd)?/(fused/T128(/hd128)?|naive/T128)/min_time'
           '^((gemm|matmul_bwd)/native|gemm_bf16/(native|vendor))/256x4096x1024/'
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
  filters=('^attention_bf16(_bwd)?/[a-z_]+/T(1024|2048)(/hd128)?/min_time'
           '^(gemm|gemm_bf16|gemm_bf16_stored|matmul_bwd|matmul_bwd_gelu)/(native|vendor)/2048x[0-9x]+/min_time'
           '^attention(_bwd)?/(naive|fused|fused_cuda_cores|batched_gemm)/T2048[^/]*(/[^/]*)?/min_time'
           '^((bias_bwd|layernorm|rmsnorm|gelu|swiglu|residual|rope|softmax)(_bf16)?|probe_one_lane|probe_per_tensor|adamw)/')
fi
for f in "$bin/kformer" "$bin/kformer-kernel-bench"; do
  [ -x "$f" ] || { say "no $f: rebuild the bundle with scripts/gpu_bundle.sh (it builds kformer-kernel-bench too)"; exit 2; }
done
say "scripts from $py; $("$python" -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -n 1)"
cd "$top" || exit 2

# --- the measurements ------------------------------------------------------------------------------
deadline=$((SECONDS + budget))
# kformer-kernel-bench in four runs, each with its own time cap, merged into kernel_bench.json
# (what a run cut short had written is kept). The bf16 attention runs first, so that issue 35's
# cases (vendor against SDPA) are measured whatever runs out of time later; within it the bench
# registers vendor first and naive last for the same reason. Its own run, apart from the fp32
# attention, because one cap over both was spent on the fp32 cases (session 14: 32 s ran a few).
# The caps are for the default budget (540 s) and shrink with a smaller one, leaving the steps the
# same share.
parts=()
part=(attention_bf16 gemm attention memory)
cap=($((70 * budget / 540)) $((140 * budget / 540)) $((50 * budget / 540)) $((90 * budget / 540)))
what=("(f) attention in bf16, vendor (cuDNN) first" "(a) GEMM native and cuBLAS" "(b) attention fused, naive, batched_gemm"
  "(c) memory-bound kernels and the copy")
skipped() { case " ${KFORMER_PERF_SKIP:-} " in *" $1 "*) return 0 ;; esac; return 1; }
# A skipped GEMM part leaves its time to the fp32 attention (a third: at a 290 s budget its own
# 32 s ended after one case on an H200, session 14) and the memory-bound cases (the longest list);
# a skipped fp32 attention leaves its own, with that third, to the bf16 attention.
skipped gemm && cap[2]=$((cap[2] + cap[1] / 3)) && cap[3]=$((cap[3] + cap[1] * 2 / 3))
skipped attention && cap[0]=$((cap[0] + cap[2]))
sdpa_cap=$((60 * budget / 540))
skipped sdpa && sdpa_cap=0
# Skipped steps leave the whole budget to the kernel parts (a second call that measures them alone).
if skipped steps; then
  kept=$sdpa_cap
  for i in 0 1 2 3; do skipped "${part[i]}" || kept=$((kept + cap[i])); done
  if [ "$kept" -gt 0 ]; then
    for i in 0 1 2 3; do cap[i]=$((cap[i] * (budget - 10) / kept)); done
    sdpa_cap=$((sdpa_cap * (budget - 10) / kept))
  fi
fi
step_result() { awk -F'\t' -v n="$1" '$1 == n {r = $3; s = $4} END {print r + 0, s + 0}' "$steps"; }  # NAME: its exit, seconds
for i in 0 1 2 3; do
  skipped "${part[i]}" && { say "kernel-${part[i]} skipped (KFORMER_PERF_SKIP)"; continue; }
  step "kernel-${part[i]}" bench "${cap[i]}" "${what[i]}" -- "$bin/kformer-kernel-bench" \
    "--benchmark_filter=${filters[i]}" --benchmark_out="$work/${part[i]}.json" --benchmark_out_format=json
  parts+=("$work/${part[i]}.json")
  # A crash (a signal: exit over 128) in one case: the rest of the part again, without it (at most
  # three times), each crashed case named in the log (session 50: a segmentation fault in the memory
  # part's fifteenth case on an H200 cost the other fifty).
  read -r rc took < <(step_result "kernel-${part[i]}")
  part_end=$((SECONDS + cap[i] - took))  # the part's cap, crashes and all
  filter=${filters[i]}
  for again in 1 2 3; do
    if [ "$rc" -le 128 ] || [ "$rc" -eq 137 ]; then break; fi  # no crash (137: the time cap's kill)
    # The cases that run's filter lists, less those its report holds: the first is the one it
    # crashed in, the others the next run's.
    "$bin/kformer-kernel-bench" --benchmark_list_tests "--benchmark_filter=$filter" >"$work/${part[i]}.list" 2>/dev/null
    mapfile -t rest < <("$python" "$py/scripts/gpu_perf_summary.py" "$outdir" --remaining "${parts[-1]}" "$work/${part[i]}.list")
    [ ${#rest[@]} -ge 1 ] && say "kernel-${part[i]}: exit $rc in ${rest[0]#crashed }"
    [ ${#rest[@]} -ge 2 ] || break
    filter=${rest[1]}
    step "kernel-${part[i]}-rest$again" bench $((part_end - SECONDS)) "${what[i]}, the cases after ${rest[0]#crashed }" -- \
      "$bin/kformer-kernel-bench" "--benchmark_filter=$filter" --benchmark_out="$work/${part[i]}-rest$again.json" \
      --benchmark_out_format=json
    parts+=("$work/${part[i]}-rest$again.json")
    read -r rc _ < <(step_result "kernel-${part[i]}-rest$again")
  done
done
"$python" "$py/scripts/gpu_perf_summary.py" "$outdir" --merge-bench "${parts[@]}" >>"$logf" 2>&1 ||
  say "the kernel benchmark's reports could not be merged (log: gpu_perf.log)"
if skipped sdpa; then
  say "sdpa skipped (KFORMER_PERF_SKIP)"
else
  step sdpa python "$sdpa_cap" "(e) PyTorch SDPA at the attention cases' shapes, fp32 and bf16" -- \
    "$python" "$py/bench/attention_vs_sdpa.py" --kernel-bench "$outdir/kernel_bench.json" --T "$T" \
    --device "$device" "${sdpa_args[@]}" --json "$outdir/sdpa.json"
fi
skipped steps && say "the training steps skipped (KFORMER_PERF_SKIP)"
for precision in fp32 bf16; do
  skipped steps && break
  # Half of what is left for the first, all of it for the second; the script stops its rounds
  # (and cuts torch.compile) 15 s before the cap.
  left=$((deadline - SECONDS - 10))
  [ "$precision" = fp32 ] && left=$((left / 2))
  step "step-$precision" python "$left" "(d) the training step against PyTorch, $precision" -- \
    "$python" "$py/bench/step_vs_torch_gpu.py" --kformer "$bin/kformer" --device "$device" --precision "$precision" \
    --attention "${KFORMER_STEP_ATTENTION:-auto}" --gemm "${KFORMER_STEP_GEMM:-auto}" "${step_args[@]}" --budget-s $((left > 30 ? left - 15 : 15)) --json "$outdir/step_$precision.json" \
    --keep-report "$outdir"
done

# --- the table ---------------------------------------------------------------------------------------
echo
summarize | tee -a "$logf" || say "the summary failed (log: gpu_perf.log)"
failed=$(awk -F'\t' '$3 != 0' "$steps" | wc -l)
say "$(($(wc -l <"$steps") - failed)) step(s) ran, $failed did not; $outdir/summary.md"
[ "$failed" -eq 0 ]
