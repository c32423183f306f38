#!/usr/bin/env bash
# One CPU's run of the portability deck, kept as raw outputs: the GPT-2 124M training step (B 8,
# T 1024: bench/step_vs_torch_gpu.py's gpt2 shape, the one a GPU session times) of kformer against
# PyTorch eager on the same cores, fp32 then bf16, with kformer's whole reports, into
# docs/cpu-runs/<date>-<cpu-slug>/ (the slug from lscpu: vendor, family, widest vector ISA), where
# scripts/portability_table.py takes them with the GPU runs' for the user guide's table.
#
#   scripts/cpu_run.sh [BINDIR] [NAME]   BINDIR: kformer's (default build/default/bin);
#                                        NAME: the folder's name instead (DATE-CPU-...)
#
# Each precision: 3 steps, the first left out (its first touches), one round, no torch.compile; on
# 2 cores about 4 minutes in all. The folder: lscpu.txt, step_{fp32,bf16}.json (the bench's
# figures), step_{fp32,bf16}_kformer.json (kformer's reports), cpu_run.log, and manifest.json
# (scripts/gpu_manifest.py: each file's sha256, the CPU). An existing folder of that name: exit 2.
# KFORMER_CPU_RUNS: the folder of kept runs (default docs/cpu-runs).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "cpu_run: $*" >&2; exit 2; }
case "${1:-}" in -h|--help) sed -n '2,14p' "$0"; exit 0 ;; esac
bin=$(realpath -m "${1:-$top/build/default/bin}")
[ -x "$bin/kformer" ] || die "no $bin/kformer: build first (scripts/test.sh), or give its folder"
python=/usr/bin/python3  # Debian's, which sees python3-torch
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lscpu >"$work/lscpu.txt"
cpu_slug=$("$python" -c "import sys; sys.path.insert(0, sys.argv[1]); import gpu_manifest; print(gpu_manifest.cpu_of(sys.argv[2])[1] or '')" \
  "$top/scripts" "$work")
[ -n "$cpu_slug" ] || die "lscpu names no model: cannot say which CPU ran"
name=${2:-$(date -u +%Y-%m-%d)-$cpu_slug}
[[ "$name" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9][a-z0-9.-]*$ ]] || die "NAME '$name' is not DATE-CPU[-...] in lower case"
runs=${KFORMER_CPU_RUNS:-$top/docs/cpu-runs}
out=$runs/$name
[ ! -e "$out" ] || die "$out exists: give another NAME (e.g. $name-2)"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
command="scripts/cpu_run.sh $*"
exits=()
for precision in fp32 bf16; do
  echo "== $precision: bench/step_vs_torch_gpu.py --device cpu" | tee -a "$work/cpu_run.log"
  rc=0
  "$python" "$top/bench/step_vs_torch_gpu.py" --kformer "$bin/kformer" --device cpu --threads "$(nproc)" \
    --precision "$precision" --shape gpt2 --steps 3 --warmup 1 --rounds 1 --compile off \
    --json "$work/step_$precision.json" --keep-report "$work" >>"$work/cpu_run.log" 2>&1 || rc=$?
  exits+=(--exit "step-$precision=$rc")
  tail -4 "$work/cpu_run.log"
done
"$python" "$top/scripts/gpu_manifest.py" write "$work" --command "$command" --started "$started" "${exits[@]}"
"$python" "$top/scripts/gpu_manifest.py" check "$work" >/dev/null
mkdir -p "$runs"
cp -r "$work" "$out"
chmod -R a+rX,go-w "$out"
echo "cpu_run: kept in $out; then scripts/portability_table.py"
