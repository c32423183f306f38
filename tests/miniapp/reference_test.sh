#!/usr/bin/env bash
# kformer against an independent PyTorch implementation (scripts/reference/kformer_ref.py, Debian's
# python3-torch): from kformer's exported weights and batch, the loss and every parameter gradient
# to 1e-5; and over 5 training steps rebuilt from the deck alone, every loss to 1e-5. Both
# families, and both kernel variants (gpt: native GEMM + naive attention; llama: vendor + fused);
# the same in bf16 mixed precision within bf16 tolerances.
# Then PyTorch reads a kformer checkpoint and trains on from it as kformer does.
#   reference_test.sh KFORMER SOURCE_DIR
set -u
kformer=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "FAIL: /usr/bin/python3 cannot import torch: run scripts/setup.sh (installs python3-torch)"; exit 1
fi
fails=0
check() {  # name [reference options --] overrides...   (KF_ENV: VAR=value words for kformer)
  local name=$1; shift
  local opts=(--rtol 1e-5)
  if [ "${1:-}" = "--opts" ]; then opts=(); shift; while [ "$1" != -- ]; do opts+=("$1"); shift; done; shift; fi
  # shellcheck disable=SC2086  # KF_ENV is a list of VAR=value words
  env ${KF_ENV:-} "$kformer" "$src/input/tiny.yaml" train.steps=5 output.json="$tmp/$name.json" output.export="$tmp/$name.st" "$@" \
    >"$tmp/$name.log" 2>&1 || { echo "FAIL: $name did not run"; tail -5 "$tmp/$name.log"; fails=$((fails + 1)); return; }
  echo "== $name ($*)"
  /usr/bin/python3 "$src/scripts/reference/kformer_ref.py" "$tmp/$name.json" --export "$tmp/$name.st" "${opts[@]}" ||
    fails=$((fails + 1))
}
check gpt model.family=gpt kernels.gemm=native kernels.attention=naive
check llama model.family=llama model.n_kv_heads=2 kernels.gemm=vendor kernels.attention=fused
# bf16 mixed precision against the reference's explicit roundings at kformer's bf16 points. Both
# sides round the same values at the same points, so they differ only where fp32 summation order
# (at most K 2^-24 relative, K <= 256 here: eta <= 1.5e-5, whatever the CPU, GEMM library or
# vector width) puts a value on the other side of a bf16 rounding boundary: with probability at
# most 2^8 eta, by one bf16 step (2^-7), an rms of at most 2^-3 sqrt(eta) = 4.9e-4 per point. Over
# the r = 50 points of tiny's deepest path (29 forward, 21 backward), independent: sqrt(r) times
# that, and 4 sigma: every gradient tensor within 1.4e-2 (measured 2-3e-3; a dropped term or a
# wrong scale in one tensor moves it by 10% and more). The loss from the exported weights within
# 1e-5 (measured 4e-7 and 1.1e-6 on the two GEMM paths below). The five iterations are compared
# with a float64 run without roundings: kformer's bf16 is that far from exact by its own rounding
# points, which are the same on every CPU; a CPU moves it only by the spread above (measured
# between the two GEMM paths on one machine: 2e-5 in loss, 3e-4 in gradient norm). Losses within
# 2e-4 (measured 2e-5) and gradient norms within 2e-3 (measured 6e-4). Planted in the bf16 path,
# a bf16 activation gradient at half its value or the MLP branch's term of d x_mid dropped fail
# (gradient norms 50% and 20% apart; docs/bf16.md, "Tests").
bf=(--opts --rtol 2e-4 --export-rtol 1e-5 --grad-rtol 1.4e-2 --)
check gpt-bf16 "${bf[@]}" model.family=gpt kernels.gemm=native kernels.attention=naive train.precision=bf16
check llama-bf16 "${bf[@]}" model.family=llama model.n_kv_heads=2 kernels.gemm=vendor kernels.attention=fused \
  train.precision=bf16
# The native bf16 GEMM's widening path, which CPUs without AVX512-BF16 take (on those this is the
# gpt-bf16 case again): the same bounds on every CPU.
KF_ENV=KFORMER_GEMM_BF16_DOT=0 check gpt-bf16-widening "${bf[@]}" model.family=gpt kernels.gemm=native \
  kernels.attention=naive train.precision=bf16
# PyTorch reads a kformer checkpoint (checksums, then 5 more iterations from its weights, moments
# and data position) and gets the losses kformer gets when it resumes from it.
for family in gpt llama; do
  # shellcheck disable=SC2015  # the { ...; continue; } block ends the iteration either way
  "$kformer" "$src/input/tiny.yaml" model.family=$family train.steps=10 train.stop_at=5 checkpoint.save="$tmp/ck-$family" \
    >"$tmp/ck-$family.log" 2>&1 &&
  "$kformer" "$src/input/tiny.yaml" model.family=$family train.steps=10 checkpoint.load="$tmp/ck-$family" \
    output.json="$tmp/resumed-$family.json" >>"$tmp/ck-$family.log" 2>&1 ||
    { echo "FAIL: checkpoint runs ($family)"; tail -5 "$tmp/ck-$family.log"; fails=$((fails + 1)); continue; }
  echo "== checkpoint read by PyTorch ($family)"
  /usr/bin/python3 "$src/scripts/reference/check_checkpoint.py" "$tmp/ck-$family" "$tmp/resumed-$family.json" ||
    fails=$((fails + 1))
done
[ $fails -eq 0 ] && echo "reference: all checks passed"
exit $((fails > 0))
