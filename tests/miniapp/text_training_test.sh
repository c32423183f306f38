#!/usr/bin/env bash
# Training on real text lowers the loss: the GPL-3 text that every Debian ships, byte-level
# (vocab 256), tiny.yaml for 300 iterations; the mean loss of the last 20 must be well below the
# uniform ln(256) = 5.545 (we ask for < 3.5; a 2-layer byte model gets near 2.5).
#   text_training_test.sh KFORMER SOURCE_DIR
set -u
kformer=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
text=/usr/share/common-licenses/GPL-3
[ -f "$text" ] || { echo "FAIL: $text is missing (base-files ships it)"; exit 1; }
/usr/bin/python3 "$src/scripts/make_tokens.py" "$text" "$tmp/gpl.bin" || exit 1
"$kformer" "$src/input/tiny.yaml" data.source="$tmp/gpl.bin" train.steps=300 train.lr=3e-3 train.warmup=10 \
  kernels.gemm=vendor output.log_every=50 output.json="$tmp/run.json" || exit 1
/usr/bin/python3 - "$tmp/run.json" <<'PY'
import json, math, sys
losses = [r["loss"] for r in json.load(open(sys.argv[1]))["iterations"]]
first, last = losses[0], sum(losses[-20:]) / 20
print(f"text training: first loss {first:.3f} (ln 256 = {math.log(256):.3f}), mean of the last 20 {last:.3f}")
sys.exit(0 if last < 3.5 else 1)
PY
