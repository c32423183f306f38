#!/usr/bin/env bash
# One device-tool command that does all of a lent GPU's work from one bundle (scripts/gpu_bundle.sh):
# scripts/gpu_check.sh (correctness), `kformer calibrate` (a measured profile of this GPU), then
# scripts/gpu_perf.sh (the performance targets), inside the tool's 600 s per command. The tool
# brings back at most 8 files, so both scripts' folders travel packed in one archive.
#
#   scripts/gpu_session.sh [CHECK_S CALIBRATE_S PERF_S [OWN_S]]   defaults 170 80 300 0 (550 s in all)
#
# OWN_S > 0: also calibrate at the GPT-2 124M step's own shapes (gpu_perf.sh's step: micro-batch 8,
# T 1024, vocab 50304, cuBLAS, kernels.attention from KFORMER_STEP_ATTENTION), into
# calibrate/own.yaml, so that predict of that step can be set against its measured time here.
#
# With the device tool: command scripts/gpu_session.sh, carry ["build/gpu-bundle"], timeout_s 590.
# OUTDIR ($OUT there, else build/gpu-session) receives:
#   gpu_session.tgz   check/ (gpu_check.sh's files), perf/ (gpu_perf.sh's), calibrate/ (the profile
#                     and its log)
#   gpu_check.json, summary.md, h100-measured.yaml   the verdicts, the targets table and the
#                     profile, unpacked for a first look
# Exit: the worst of the three (0 when every one passed).
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,15p' "$0"; exit 0 ;; esac
check_s=${1:-170} calibrate_s=${2:-80} perf_s=${3:-300} own_s=${4:-0}
out=$(realpath -m "${OUT:-$top/build/gpu-session}")
bundle=$(realpath -m "${KFORMER_BUNDLE_DIR:-$top/build/gpu-bundle}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/calibrate"

KFORMER_CHECK_BUDGET_S=$check_s "$top/scripts/gpu_check.sh" "$work/check"
rc_check=$?

# The profile: the GPT-3 small deck's shapes (those of the 124M runs above), one rank, both
# precisions. gpu_check.sh left the bundle's environment unexported, so set it again here.
# shellcheck source=scripts/gpu_env.sh
source "$top/scripts/gpu_env.sh"
tool=gpu_session logf=$work/calibrate/gpu_env.log
rc_cal=2
if kformer_gpu_env "$bundle" "$work/calibrate" >/dev/null 2>&1; then
  (cd "$top" && timeout "$calibrate_s" "$bundle/bin/kformer" calibrate input/gpt3-small.yaml \
     predict.machine="$work/calibrate/h100-measured.yaml") >"$work/calibrate/calibrate.log" 2>&1
  rc_cal=$?
  echo "gpu_session: calibrate exit $rc_cal: $(tail -n 1 "$work/calibrate/calibrate.log")"
  if [ "$own_s" -gt 0 ]; then
    (cd "$top" && timeout "$own_s" "$bundle/bin/kformer" calibrate input/gpt3-small.yaml model.vocab_size=50304 \
       model.max_seq_len=1024 train.seq_len=1024 train.global_batch=8 train.micro_batch=8 kernels.gemm=vendor \
       kernels.attention="${KFORMER_STEP_ATTENTION:-fused}" predict.machine="$work/calibrate/own.yaml") \
      >"$work/calibrate/own.log" 2>&1
    echo "gpu_session: calibrate at the step's shapes exit $?: $(tail -n 1 "$work/calibrate/own.log")"
  fi
else
  echo "gpu_session: calibrate not run: $gpu_env_error"
fi

KFORMER_PERF_BUDGET_S=$perf_s "$top/scripts/gpu_perf.sh" "$work/perf"
rc_perf=$?

tar czf "$out/gpu_session.tgz" -C "$work" check calibrate perf
cp "$work/check/gpu_check.json" "$work/perf/summary.md" "$work/calibrate/h100-measured.yaml" "$out/" 2>/dev/null
echo "gpu_session: check exit $rc_check, calibrate exit $rc_cal, perf exit $rc_perf; $out"
rc=0
for r in $rc_check $rc_cal $rc_perf; do [ "$r" -gt "$rc" ] && rc=$r; done
exit "$rc"
