#!/usr/bin/env bash
# One device-tool command that does all of a lent GPU's work from one bundle (scripts/gpu_bundle.sh):
# scripts/gpu_check.sh (correctness), `kformer calibrate` (a measured profile of this GPU), then
# scripts/gpu_perf.sh (the performance targets), inside the tool's 600 s per command; then the raw
# outputs of all three with a manifest, ready for scripts/gpu_keep.sh to keep in docs/gpu-runs/.
#
#   scripts/gpu_session.sh [CHECK_S CALIBRATE_S PERF_S [OWN_S [LARGE_S [EAGER_S [FLASH_S [CONTEND_S [SUSTAIN_S]]]]]]]]
#   defaults 170 80 300 0 0 0 0 0 0
# CHECK_S, CALIBRATE_S or PERF_S 0 leaves that part out, so that a second call on the still-warm
# machine can run the optional parts alone (kept with scripts/gpu_keep.sh RUN_DIR DATE-GPU-2).
#
# OWN_S > 0: also calibrate at the GPT-2 124M step's own shapes (gpu_perf.sh's step: micro-batch 8,
# T 1024, vocab 50304, kernels.attention and kernels.gemm from KFORMER_STEP_ATTENTION and
# KFORMER_STEP_GEMM, default auto as in the step and the decks), into calibrate/own.yaml, so that
# predict of that step can be set against its measured time here.
# LARGE_S > 0: also calibrate at the shapes of the H100 rows of scripts/published_runs.yaml (hidden
# 8192, sequence 4096, micro-batch 1, vocabulary 131072, one layer: GEMMs of 0.8-9 TFLOP), into
# calibrate/large.yaml, kformer's own measurement of the bf16 GEMM curve where those rows run (issue
# 37; `scripts/gemm_curve.py calibrate/large.yaml --check input/machines/h100-sxm-80gb.yaml --within 5`
# sets it against the shipped curve, OpenXLA's fit, its fp32 outputs counted as predict counts them).
# EAGER_S > 0: also bench/eager_op_cost.py (eager PyTorch's host time per operator and per layer,
# async and under CUDA_LAUNCH_BLOCKING=1, seed note 001's step, AdamW, DTensor and FSDP2 on one rank,
# ezpz's plan inside FSDP1 with its model's top and AdamW's step beside the layer: the figures of a
# profile's eager_host section, issue 37 item 5) into eager/, about 60 s.
# FLASH_S > 0: also bench/flash2_rate.py (PyTorch SDPA's FlashAttention-2, cuDNN and memory-efficient
# backends, bf16, causal, at the published rows' attention shapes: the figure of a profile's
# bf16.attention.flash2_tflops, measured instead of the FlashAttention papers') into flash/, about 15 s.
# CONTEND_S > 0: also the bundle's kformer-sm-share (bench/contention: cuBLAS GEMMs and a streaming copy
# beside a kernel that holds 16-32 SMs as an NCCL collective does, with and without HBM traffic, set
# against the SM-share model predict charges, issue 37; since session 50 also cuBLASLt told the SMs
# left, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET) into contend/, about 20 s (its JSON kept case by case).
# SUSTAIN_S > 0: also the bundle's kformer-sustained (bench/contention: a bf16 GEMM's rate over
# SUSTAIN_S - 5 seconds, alone and between 1 GiB streaming copies, against its first half second;
# issue 37: the tenth of a step predict misses on both GPUs once their GEMM curve is measured), with
# nvidia-smi's SM clock, power and temperature every 0.5 s beside it, into sustain/; 45 s is enough.
# Then, here: scripts/validate_published.py --scale h100-sxm-80gb:compute=R, R the summary's
# interleaved_over_early (the last third between copies over windows 2-6 alone; the first window is
# the warm-up: docs/predict-published.md, "The same layouts on both GPUs"). One H200 gave 1.11.
# KFORMER_PERF_SKIP, KFORMER_STEP_ATTENTION, KFORMER_STEP_GEMM: passed on to gpu_perf.sh (see it).
# Issue 35 (vendor attention against SDPA, the 124M step with kernels.attention=auto):
#   KFORMER_PERF_SKIP="gemm attention memory" scripts/gpu_session.sh 170 80 300
# What session 50's H200 run left (docs/gpu-runs/2026-12-04-h200*): the CUDA tests again (AdamW's
# fix) and the memory-bound part whole (it crashed in its fifteenth case), then the steps, with the
# step's own calibration (session 51's norms and loss: their rates against session 50's own.yaml):
#   KFORMER_SESSION_S=560 KFORMER_PERF_SKIP="gemm" scripts/gpu_session.sh 110 0 340 60
# (since session 54 the fp32 attention part runs too: fused's new tensor-core shape in fp32 beside
# its CUDA-core shape, batched_gemm and SDPA, whose tests test_warp_mma_cuda and
# test_attention_tiles_cuda the check runs first; since session 53 its step JSONs also say where eager's step goes, by kformer's families
# (eager.kernel_families, beside kformer.kernel_times in perf/summary.md), and each memory-bound case
# is set against a copy of its own size too: copy_same_gbps, vs_same_size in kernel_bench.json)
# and on the machine it leaves warm, kformer-sm-share with its holders polling device memory, and
# eager PyTorch's host time with the model's top and AdamW under ezpz's plan (seed note 001), and
# (since session 53) SDPA's flash kernels at TP-split calls of other lengths (half_rate_share):
#   KFORMER_SESSION_S=150 scripts/gpu_session.sh 0 0 0 0 0 70 20 25 0
#
# With the device tool: command "tar -C build -xJf build/gpu-bundle.tar.xz && scripts/gpu_session.sh",
# carry ["build/gpu-bundle.tar.xz"] (scripts/gpu_bundle.sh writes it), timeout_s 590.
# OUTDIR ($OUT there, else build/gpu-session) receives 8 files, the most the tool brings back:
#   manifest.json     date, GPU (nvidia-smi), the bundle's git hash, this command, exit statuses,
#                     and every raw file with its size and sha256 (scripts/gpu_manifest.py)
#   gpu_session.tgz   all of them: check/ (gpu_check.sh's files), calibrate/ (the profile and its
#                     logs), perf/ (gpu_perf.sh's), bundle/MANIFEST, manifest.json
#   check/gpu_check.json, perf/{kernel_bench,sdpa,step_fp32,step_bf16}.json,
#   calibrate/h100-measured.yaml      the ones the GPU tables are made from, also as plain files
# Logs over 128 KiB keep their tails; other files over 512 KiB or not text are left out (listed in
# the manifest), so the run stays small enough to commit. Then, here:
#   scripts/gpu_keep.sh FETCHED_DIR && scripts/gpu_tables.py
# Exit: the worst of the three (0 when every one passed), at least 1 when the manifest or the
# archive could not be written.
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,58p' "$0"; exit 0 ;; esac
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# The command as it would be typed again, with the variables that change what it measures.
command=scripts/gpu_session.sh
[ $# -gt 0 ] && command+=$(printf ' %q' "$@")
for v in KFORMER_STEP_ATTENTION KFORMER_STEP_GEMM KFORMER_PERF_SKIP KFORMER_SESSION_S; do
  [ -n "${!v:-}" ] && command="$v=$(printf %q "${!v}") $command"
done
check_s=${1:-170} calibrate_s=${2:-80} perf_s=${3:-300} own_s=${4:-0} large_s=${5:-0} eager_s=${6:-0} flash_s=${7:-0}
contend_s=${8:-0} sustain_s=${9:-0}
# KFORMER_SESSION_S: the whole run's seconds (the device call's limit less its transfers): each part
# gets at most what is left of it less 20 s for the archive, and none under 10 s, so that a run cut
# by what is left of the session's device time still writes its manifest and archive.
session_end=$((SECONDS + ${KFORMER_SESSION_S:-100000}))
fit() {  # BUDGET: prints the budget the part may take now (0: leave it out)
  local left=$((session_end - SECONDS - 20)) b=$1
  [ "$b" -gt "$left" ] && b=$left
  [ "$b" -lt 10 ] && b=0
  echo "$b"
}
out=$(realpath -m "${OUT:-$top/build/gpu-session}")
bundle=$(realpath -m "${KFORMER_BUNDLE_DIR:-$top/build/gpu-bundle}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/calibrate"

# A zero budget leaves that part out (a second call on a warm machine for the optional parts alone).
rc_check=-1 rc_perf=-1
check_s=$(fit "$check_s")
if [ "$check_s" -gt 0 ]; then
  KFORMER_CHECK_BUDGET_S=$check_s "$top/scripts/gpu_check.sh" "$work/check"
  rc_check=$?
fi

# The profile: the GPT-3 small deck's shapes (those of the 124M runs above), one rank, both
# precisions. gpu_check.sh left the bundle's environment unexported, so set it again here.
# shellcheck source=scripts/gpu_env.sh
source "$top/scripts/gpu_env.sh"
tool=gpu_session logf=$work/calibrate/gpu_env.log
rc_cal=2 rc_contend=2 rc_sustain=2
calibrate_s=$(fit "$calibrate_s")
[ "$calibrate_s" -gt 0 ] || rc_cal=-1
if kformer_gpu_env "$bundle" "$work/calibrate" >/dev/null 2>&1; then
  if [ "$calibrate_s" -gt 0 ]; then
    (cd "$top" && timeout "$calibrate_s" "$bundle/bin/kformer" calibrate input/gpt3-small.yaml \
       predict.machine="$work/calibrate/h100-measured.yaml") >"$work/calibrate/calibrate.log" 2>&1
    rc_cal=$?
    echo "gpu_session: calibrate exit $rc_cal: $(tail -n 1 "$work/calibrate/calibrate.log")"
  fi
  own_s=$(fit "$own_s")
  if [ "$own_s" -gt 0 ]; then
    (cd "$top" && timeout "$own_s" "$bundle/bin/kformer" calibrate input/gpt3-small.yaml model.vocab_size=50304 \
       model.max_seq_len=1024 train.seq_len=1024 train.global_batch=8 train.micro_batch=8 \
       kernels.gemm="${KFORMER_STEP_GEMM:-auto}" kernels.attention="${KFORMER_STEP_ATTENTION:-auto}" predict.machine="$work/calibrate/own.yaml") \
      >"$work/calibrate/own.log" 2>&1
    echo "gpu_session: calibrate at the step's shapes exit $?: $(tail -n 1 "$work/calibrate/own.log")"
  fi
  large_s=$(fit "$large_s")
  if [ "$large_s" -gt 0 ]; then
    (cd "$top" && timeout "$large_s" "$bundle/bin/kformer" calibrate input/gpt3-small.yaml model.n_layers=1 \
       model.d_model=8192 model.n_heads=64 model.vocab_size=131072 model.max_seq_len=4096 train.seq_len=4096 \
       train.global_batch=1 train.micro_batch=1 predict.machine="$work/calibrate/large.yaml") \
      >"$work/calibrate/large.log" 2>&1
    echo "gpu_session: calibrate at the H100 rows' shapes exit $?: $(tail -n 1 "$work/calibrate/large.log")"
  fi
  env_error=""
else
  echo "gpu_session: calibrate not run: $gpu_env_error"
  env_error=$gpu_env_error
fi

# A program of the bundle within BUDGET, its output in DIR/LOG and its exit status in bench_rc (2
# when it could not run: no environment, or a bundle from before it); SMI_CSV other than "-":
# nvidia-smi's SM and memory clocks, power and temperature every 0.5 s into that file beside it.
#   bundle_bench DIR LOG BUDGET SMI_CSV NAME [ARGS...]
bundle_bench() {
  local dir=$1 log=$2 budget=$3 smi_csv=$4 name=$5 smi=""
  shift 5
  bench_rc=2
  mkdir -p "$work/$dir"
  if [ -n "$env_error" ]; then
    echo "gpu_session: not run: $env_error" >"$work/$dir/$log"
    return
  fi
  if [ -x "$bundle/bin/$name" ]; then
    if [ "$smi_csv" != - ]; then
      nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 500 \
        >"$smi_csv" 2>&1 &
      smi=$!
    fi
    timeout "$budget" "$bundle/bin/$name" "$@" >"$work/$dir/$log" 2>&1
    bench_rc=$?
    [ -n "$smi" ] && { kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null; }
  else
    echo "gpu_session: the bundle has no bin/$name (a bundle from before it: run scripts/gpu_bundle.sh)" >"$work/$dir/$log"
  fi
  echo "gpu_session: $name exit $bench_rc"; cat "$work/$dir/$log"
}
contend_s=$(fit "$contend_s")
if [ "$contend_s" -gt 0 ]; then
  bundle_bench contend sm_share.log "$contend_s" - kformer-sm-share --json "$work/contend/sm_share.json"
  rc_contend=$bench_rc
fi
sustain_s=$(fit "$sustain_s")
if [ "$sustain_s" -gt 0 ]; then
  bundle_bench sustain sustained.log "$sustain_s" "$work/sustain/nvidia_smi.csv" kformer-sustained \
    --seconds $((sustain_s > 7 ? sustain_s - 5 : 2)) --json "$work/sustain/sustained.json"
  rc_sustain=$bench_rc
fi

perf_s=$(fit "$perf_s")
if [ "$perf_s" -gt 0 ]; then
  KFORMER_PERF_BUDGET_S=$perf_s "$top/scripts/gpu_perf.sh" "$work/perf"
  rc_perf=$?
fi

exits=()  # the parts run (a part left out has -1 and no entry)
for e in check=$rc_check calibrate=$rc_cal perf=$rc_perf; do
  [ "${e#*=}" = -1 ] || exits+=(--exit "$e")
done
# A PyTorch script of bench/ within its budget, its JSON and log under DIR: torch_bench DIR BUDGET_S NAME.
torch_bench() {
  local dir=$1 budget=$2 name=$3 rc
  budget=$(fit "$budget")
  [ "$budget" -gt 0 ] || return 0
  mkdir -p "$work/$dir"
  (cd "$top" && PYTHONUNBUFFERED=1 timeout "$budget" "${PYTHON:-python3}" "bench/$name.py" \
     --json "$work/$dir/$name.json") >"$work/$dir/$name.log" 2>&1
  rc=$?
  echo "gpu_session: $name exit $rc"; cat "$work/$dir/$name.log"
  exits+=(--exit "$dir=$rc")
}
torch_bench eager "$eager_s" eager_op_cost
torch_bench flash "$flash_s" flash2_rate
[ "$contend_s" -gt 0 ] && exits+=(--exit "contend=$rc_contend")
[ "$sustain_s" -gt 0 ] && exits+=(--exit "sustain=$rc_sustain")

# --- the raw outputs and their manifest -------------------------------------------------------
mkdir -p "$work/bundle"
cp "$bundle/MANIFEST" "$work/bundle/" 2>/dev/null
rc_keep=0
python3 "$top/scripts/gpu_manifest.py" write "$work" --command "$command" --started "$started" "${exits[@]}" || rc_keep=1
rm -rf "$out/manifest.json" "$out/gpu_session.tgz" "$out/check" "$out/calibrate" "$out/perf" "$out/eager" "$out/flash" \
  "$out/contend" "$out/sustain"  # an earlier run's
tar czf "$out/gpu_session.tgz" -C "$work" . || rc_keep=1
cp "$work/manifest.json" "$out/" 2>/dev/null
for f in check/gpu_check.json perf/kernel_bench.json perf/sdpa.json perf/step_fp32.json perf/step_bf16.json \
         calibrate/h100-measured.yaml; do
  [ -f "$work/$f" ] && mkdir -p "$out/${f%/*}" && cp "$work/$f" "$out/$f"
done
[ "$rc_keep" -eq 0 ] || echo "gpu_session: the manifest or the archive could not be written"
echo "gpu_session: check exit $rc_check, calibrate exit $rc_cal, perf exit $rc_perf (-1: left out); $out"
rc=0
for r in $rc_check $rc_cal $rc_perf $rc_keep; do [ "$r" -gt "$rc" ] && rc=$r; done
exit "$rc"
