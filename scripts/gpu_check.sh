#!/usr/bin/env bash
# Runs on a GPU machine what only a GPU can check, from the bundle scripts/gpu_bundle.sh built
# (build/gpu-bundle, or KFORMER_BUNDLE_DIR): the CUDA kernel tests, the NCCL conformance suite on
# one rank, and one-GPU training runs in fp32 and bf16: input/tiny.yaml, then GPT-2 124M shapes
# (12 layers, d 768, 12 heads, vocab 50304, seq 1024; 5 steps of 8 sequences). The tiny runs'
# iteration-1 losses must match the CPU's (the host build's, carried in the bundle's MANIFEST):
# fp32 within 1e-5 relative (step tiny-vs-cpu), bf16 within 2e-3 (step tiny-bf16-vs-cpu), also with
# kernels.attention=batched_gemm (steps tiny-batched-vs-cpu, tiny-batched-bf16-vs-cpu).
#
#   scripts/gpu_check.sh [OUTDIR]      OUTDIR: $OUT when set (the device tool's), else build/gpu-check
#
# Writes into OUTDIR seven files (the device tool brings back at most 8):
#   gpu_check.json   one verdict per step (rc, seconds, test counts, losses), the GPU, the bundle
#   gpu_check.log    every command with its whole output
#   tiny.json, tiny-bf16.json, gpt2-124m.json, gpt2-124m-bf16.json   kformer's reports of the runs
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
case "${1:-}" in -h|--help) sed -n '2,22p' "$0"; exit 0 ;; -*) echo "gpu_check: unknown option '$1' (see --help)" >&2; exit 2 ;; esac
# shellcheck source=scripts/gpu_env.sh
source "$top/scripts/gpu_env.sh"
gpu_script_init gpu_check "${1:-${OUT:-$top/build/gpu-check}}" "${KFORMER_CHECK_BUDGET_S:-540}"
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
        s["summary"]["attention"] = (r.get("summary", {}).get("kernels_attention") or {}).get("kind")  # what auto chose
        s["summary"]["gemm"] = (r.get("summary", {}).get("kernels_gemm") or {}).get("impl")
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

# --- a GPU, the bundle, glibc, CUDA's libraries, Open MPI (scripts/gpu_env.sh) ------------------
kformer_gpu_env "$bundle" "$outdir" || cannot_start "$gpu_env_error"

# --- the steps ---------------------------------------------------------------------------------
deadline=$((SECONDS + budget))
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
if ! grep -q "^  comm\.backend *= auto -> nccl (NCCL build, ranks on GPUs)" "$logf"; then  # comm.backend=auto
  printf 'auto-nccl\tgpu\t1\t0\tthe dry run did not resolve comm.backend=auto to nccl\n' >>"$steps"
  say "auto-nccl FAILED: the dry run did not print 'comm.backend = auto -> nccl (NCCL build, ranks on GPUs)'"
fi
# The GPU's iteration-1 loss against the CPU's the bundle carries (MANIFEST KEY): fp32 within 1e-5
# relative (the same kernels and data, another summation order); bf16 within 2e-3 (a bf16 rounding
# of each activation, 2^-9 relative, lands on either side of a tie when the sums differ in order;
# over the step's few dozen roundings their mean effect on the loss stays under 2e-3).
compare_loss() {  # NAME JSON KEY LIMIT
  local verdict
  verdict=$(python3 - "$2" "$(manifest "$3")" "$4" <<'PY' 2>&1
import json, sys
try:
    gpu = json.load(open(sys.argv[1]))["iterations"][0]["loss"]
    cpu = float(sys.argv[2])
except Exception as e:  # no run, or a bundle without the CPU loss
    print(f"1\tno comparison: {e}")
    sys.exit(0)
limit = float(sys.argv[3])
rel = abs(gpu - cpu) / abs(cpu)
print(f"{0 if rel <= limit else 1}\tGPU {gpu!r} vs CPU {cpu!r}: relative {rel:.2e} (limit {limit:g})")
PY
)
  printf '%s\tcompare\t%s\t0\t%s\n' "$1" "${verdict%%$'\t'*}" "${verdict#*$'\t'}" >>"$steps"
  say "$1: ${verdict#*$'\t'}"
}
step tiny kformer 120 "input/tiny.yaml, comm.backend=mpi (Open MPI singleton)" -- \
  "$bundle/bin/kformer" input/tiny.yaml comm.backend=mpi output.json="$outdir/tiny.json"
compare_loss tiny-vs-cpu "$outdir/tiny.json" cpu_tiny_loss1 1e-5
step tiny-bf16 kformer 120 "input/tiny.yaml in bf16, comm.backend=nccl" -- \
  "$bundle/bin/kformer" input/tiny.yaml train.precision=bf16 comm.backend=nccl output.json="$outdir/tiny-bf16.json"
compare_loss tiny-bf16-vs-cpu "$outdir/tiny-bf16.json" cpu_tiny_bf16_loss1 2e-3
# The same two against the same CPU losses with the attention's products on cuBLAS (iteration 1's
# loss is the forward's: the batched GEMMs' sums, in another order than naive attention's loops).
for precision in fp32 bf16; do
  name=tiny-batched key=cpu_tiny_loss1 limit=1e-5
  [ "$precision" = bf16 ] && name=tiny-batched-bf16 key=cpu_tiny_bf16_loss1 limit=2e-3
  step "$name" kformer 120 "input/tiny.yaml in $precision, kernels.attention=batched_gemm, comm.backend=nccl" -- \
    "$bundle/bin/kformer" input/tiny.yaml train.precision=$precision kernels.attention=batched_gemm comm.backend=nccl \
    output.json="$work/$name.json"  # not kept: OUTDIR holds the 8 files the device tool brings back
  compare_loss "$name-vs-cpu" "$work/$name.json" "$key" "$limit"
done
for precision in fp32 bf16; do
  name=gpt2-124m; [ "$precision" = bf16 ] && name=gpt2-124m-bf16
  step "$name" kformer 200 "GPT-2 124M shapes in $precision, comm.backend=nccl, gemm and attention auto (the deck's)" -- \
    "$bundle/bin/kformer" input/gpt3-small.yaml model.vocab_size=50304 model.max_seq_len=1024 \
    train.seq_len=1024 train.steps=5 train.global_batch=8 train.micro_batch=8 comm.backend=nccl \
    train.precision=$precision output.json="$outdir/$name.json"
done

summary
failed=$(awk -F'\t' '$3 != 0' "$steps" | wc -l)
say "$(($(wc -l <"$steps") - failed)) step(s) passed, $failed failed; $outdir/gpu_check.json"
[ "$failed" -eq 0 ]
