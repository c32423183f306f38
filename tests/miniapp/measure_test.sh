#!/usr/bin/env bash
# The measurements respond to what is injected, and leave the numbers alone: a straggler at
# slowdown 4 is reported as the slowest rank with slowdown >= 2 (load on the other rank would have
# to slow it twice over to pull it under) and the same losses; under an
# emulated 20 ms network a rank spends at least 2 x 20 ms per step communicating (a lower bound,
# robust on a loaded machine); output.trace writes a merged
# Chrome trace with one process per rank and the pipeline's forward/backward spans.
#   measure_test.sh KFORMER SOURCE_DIR MPIEXEC "MPIEXEC_FLAGS"     (2 ranks)
set -u
kformer=$1; src=$2; mpiexec=$3; mpiflags=$4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() {  # name overrides...
  local name=$1; shift
  # shellcheck disable=SC2086  # the flags are a list
  "$mpiexec" -n 2 $mpiflags "$kformer" "$src/input/tiny.yaml" kernels.gemm=native train.steps=4 output.json="$tmp/$name.json" "$@" \
    >"$tmp/$name.log" 2>&1 || { echo "FAIL: $name did not run"; tail -5 "$tmp/$name.log"; exit 1; }
}
# Two ranks, so that each has a core: with more ranks than cores, time-sharing stretches compute
# spans more than the injected factor. The straggler runs data-parallel, where every rank does the
# same work (under PP the stage holding the head is slower by design: see docs/studies.md).
# d_model 256 gives each step tens of milliseconds of compute, well above scheduling jitter.
run base parallel.dp=2 model.d_model=256 model.n_heads=8
run straggler parallel.dp=2 model.d_model=256 model.n_heads=8 straggler.rank=1 straggler.slowdown=4
run network parallel.pp=2 comm.emulate.latency_us=20000 output.trace="$tmp/trace"
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
base, slow, net = (json.load(open(f"{d}/{n}.json")) for n in ("base", "straggler", "network"))
fails = []
if [r["loss"] for r in base["iterations"]] != [r["loss"] for r in slow["iterations"]]:
    fails.append("the straggler changed the losses")
s = slow["summary"]["straggler"]
# slowdown 4 sleeps rank 1 three times its own busy time: load must slow rank 0 twice over, and
# rank 1 not, to pull the measured slowdown under 2; a straggler not injected reads about 1.
if s["slowest_rank"] != 1 or s["slowdown"] < 2:
    fails.append(f"straggler not seen: {s}")
# Every rank sends and receives at least one pipeline message per micro-batch.
gap = net["summary"]["time_split_ms"]["comm_total"]
if gap < 40:
    fails.append(f"with 20 ms emulated latency a rank communicated only {gap:.1f} ms per step")
t = json.load(open(f"{d}/trace/trace.json"))["traceEvents"]
pids = {e["pid"] for e in t}
names = {e["name"] for e in t}
if pids != {0, 1} or not {"forward", "backward", "optimizer", "send", "recv"} <= names:
    fails.append(f"trace: pids {sorted(pids)}, names {sorted(names)}")
print(f"straggler {s}; network: {gap:.1f} ms communicating per step; trace {len(t)} events from ranks {sorted(pids)}")
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
