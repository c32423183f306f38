#!/usr/bin/env bash
# Activation recomputation (train.recompute, and train.recompute_layers for full on some blocks):
# the same gradients bit for bit (one-rank exports of iteration 1 byte-identical to
# train.recompute=none, both families, both attention kernels, in fp32 and in bf16 mixed
# precision); the same losses on 4-rank layouts with it on (tp, pp, zb-h1) as on one rank without
# (in bf16 too, against the one-rank bf16 run); and the activation memory measured from the
# allocated buffers of a reduced GPT-3 Small (12 layers, 12 heads, d_model 768/4, 256 tokens): full
# <= 0.35 of none, selective below none, full on half the blocks between full and none, and the
# recomputed work reported as hardware FLOPs beside the model FLOPs (half of full's for half the blocks).
#   recompute_test.sh KFORMER SOURCE_DIR [MPIEXEC "MPIEXEC_FLAGS"]
set -u
kformer=$1; src=$2; mpiexec=${3:-}; mpiflags=${4:-}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# kernels.gemm=native: the runs are compared bit for bit, and auto could take another GEMM in each.
deck=$src/input/tiny.yaml
fails=0
# half: full recomputation of the first 2 of the 4 blocks (the first 6 of 12 on the small model)
declare -A modes=([none]="train.recompute=none" [selective]="train.recompute=selective" [full]="train.recompute=full"
                  [half]="train.recompute=full train.recompute_layers=2" [op]="train.recompute=op")
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

for precision in fp32 bf16; do
  for family in gpt llama; do
    for attention in naive fused; do
      fam=(model.family="$family" kernels.attention="$attention" train.precision="$precision")
      [ "$family" = llama ] && fam+=(model.n_heads=8 model.n_kv_heads=4)
      run=$precision-$family-$attention
      ours=(selective full half)
      [ "$family" = llama ] && ours+=(op)  # torchtitan's selective op policy: llama blocks only
      for mode in none "${ours[@]}"; do
        # shellcheck disable=SC2086  # a mode is one or two keys
        "$kformer" "$deck" kernels.gemm=native train.steps=1 "${fam[@]}" ${modes[$mode]} output.export="$tmp/$run-$mode.st" \
          >"$tmp/export.log" 2>&1 || { fail "$run $mode did not run"; tail -3 "$tmp/export.log"; }
      done
      for mode in "${ours[@]}"; do
        if cmp -s "$tmp/$run-none.st" "$tmp/$run-$mode.st"; then
          echo "ok   $precision $family $attention recompute=$mode: parameters, gradients and batch of iteration 1 bitwise equal to none"
        else
          fail "$precision $family $attention recompute=$mode: the export differs from recompute=none"
        fi
      done
    done
  done
done

# Memory and FLOPs on a reduced GPT-3 Small.
small=(model.n_layers=12 model.d_model=192 model.n_heads=12 model.max_seq_len=256 train.seq_len=256
       train.micro_batch=1 train.global_batch=1 train.steps=1)
modes[half]="train.recompute=full train.recompute_layers=6"  # 6 of the small model's 12 blocks
for mode in none selective full half; do
  # shellcheck disable=SC2086  # a mode is one or two keys
  "$kformer" "$deck" kernels.gemm=native "${small[@]}" ${modes[$mode]} output.json="$tmp/small-$mode.json" >"$tmp/small.log" 2>&1 ||
    { fail "small recompute=$mode did not run"; tail -3 "$tmp/small.log"; }
done
/usr/bin/python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
r = {m: json.load(open(f"{sys.argv[1]}/small-{m}.json"))["summary"] for m in ("none", "selective", "full", "half")}
act = {m: r[m]["memory"]["activation_bytes_measured"] for m in r}
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok = ok and cond
check(act["full"] <= 0.35 * act["none"], f"full keeps {act['full'] / act['none']:.3f} of none's activations (<= 0.35)")
check(act["selective"] < act["none"], f"selective keeps {act['selective'] / act['none']:.3f} of none's activations (< 1)")
fl = {m: r[m]["flops"] for m in r}
check(fl["none"]["recompute_per_iteration_rank"] == 0, "none recomputes nothing")
# full re-runs every block's forward: a third of the blocks' model FLOPs (forward + 2x backward).
model = fl["none"]["counted_per_iteration_rank"]
check(0 < fl["full"]["recompute_per_iteration_rank"] < model / 3,
      f"full recomputes {fl['full']['recompute_per_iteration_rank'] / model:.3f} of the model FLOPs (0, 1/3)")
check(0 < fl["selective"]["recompute_per_iteration_rank"] < fl["full"]["recompute_per_iteration_rank"],
      "selective recomputes less than full")
check(all(fl[m]["counted_per_iteration_rank"] == model for m in r), "model FLOPs do not depend on recompute")
# train.recompute_layers=6 of 12: the same blocks' forward as full on half of them, and memory between.
for conv in ("recompute_per_iteration_rank", "recompute_per_iteration_all_ranks"):
    check(abs(fl["half"][conv] - fl["full"][conv] / 2) <= 1e-9 * fl["full"][conv],
          f"full on 6 of 12 blocks recomputes half of full's FLOPs ({conv})")
check(act["full"] < act["half"] < act["none"],
      f"full on 6 of 12 blocks keeps {act['half'] / act['none']:.3f} of none's activations (between full's and none's)")
h = r["full"]["hfu"] / r["full"]["mfu"]
# HFU and MFU in the field's convention (docs/figures.md): the whole model's FLOPs, recomputation beside them.
f = fl["full"]
check(abs(h - 1 - f["recompute_per_iteration_all_ranks"] / f["model_per_iteration_all_ranks"]) < 1e-9,
      f"HFU/MFU = {h:.4f} = hardware/model FLOPs")
check(fl["none"]["recompute_per_iteration_all_ranks"] == 0 < fl["selective"]["recompute_per_iteration_all_ranks"]
      < f["recompute_per_iteration_all_ranks"] < f["model_per_iteration_all_ranks"] / 3,
      "in the convention too: full recomputes more than selective, less than a third of the model FLOPs")
sys.exit(0 if ok else 1)
PY

# op on a reduced Llama (GQA, 12 blocks): the block keeps Q, V, the attention's output and row
# statistics and the gate, so with the fused attention between full's activations and none's; it
# re-runs K, the output projection and up of every block: 2 L C (KV + Q + F) FLOPs a token.
llama_small=("${small[@]}" model.family=llama model.n_kv_heads=4 kernels.attention=fused)
for mode in none op full; do
  "$kformer" "$deck" kernels.gemm=native "${llama_small[@]}" train.recompute=$mode output.json="$tmp/llama-$mode.json" \
    >"$tmp/small.log" 2>&1 || { fail "small llama recompute=$mode did not run"; tail -3 "$tmp/small.log"; }
done
/usr/bin/python3 - "$tmp" <<'PY' || fails=$((fails + 1))
import json, sys
r = {m: json.load(open(f"{sys.argv[1]}/llama-{m}.json")) for m in ("none", "op", "full")}
act = {m: r[m]["summary"]["memory"]["activation_bytes_measured"] for m in r}
m = r["op"]["config"]["model"]
L, C, H, KV, F, T = (m[k] for k in ("n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_dim", "max_seq_len"))
hd = C // H
tokens = r["op"]["config"]["train"]["global_batch"] * r["op"]["config"]["train"]["seq_len"]
want = 2 * L * C * (KV * hd + H * hd + F) * tokens
fl = r["op"]["summary"]["flops"]
ok = act["full"] < act["op"] < act["none"]
print(("ok   " if ok else "FAIL ") + f"op keeps {act['op'] / act['none']:.3f} of none's activations (full {act['full'] / act['none']:.3f})")
for conv in ("recompute_per_iteration_rank", "recompute_per_iteration_all_ranks"):
    good = abs(fl[conv] - want) <= 1e-9 * want
    print(("ok   " if good else "FAIL ") + f"op recomputes {fl[conv]:.0f} FLOPs ({conv}), 2 L C (KV + Q + F) per token: {want:.0f}")
    ok = ok and good
sys.exit(0 if ok else 1)
PY

# Layouts with recompute on against one rank without, in each precision: every iteration's loss and
# gradient norm within same_training.py's bounds (bf16 against the one-rank bf16 run).
fp32_layouts=("train.recompute=full parallel.tp=2 parallel.pp=2" "train.recompute=selective parallel.tp=4"
              "train.recompute=selective parallel.pp=4 parallel.schedule=zb-h1"
              "train.recompute=full parallel.pp=2 parallel.dp=2 parallel.zero=3"
              "train.recompute=full train.recompute_layers=1 parallel.tp=2 parallel.pp=2")
bf16_layouts=("train.recompute=full parallel.tp=2 parallel.pp=2"
              "train.recompute=selective parallel.tp=2 parallel.dp=2 parallel.zero=3")
if [ -n "$mpiexec" ]; then
  for precision in fp32 bf16; do
    if [ $precision = fp32 ]; then layouts=("${fp32_layouts[@]}")
    else layouts=("${bf16_layouts[@]}"); fi
    for family in gpt llama; do
      fam=(model.family="$family" train.precision="$precision")
      [ "$family" = llama ] && fam+=(model.n_heads=8 model.n_kv_heads=4)
      one=$tmp/$precision-$family-1.json
      "$kformer" "$deck" kernels.gemm=native train.steps=10 "${fam[@]}" output.json="$one" >"$tmp/one.log" 2>&1 ||
        { fail "$precision $family one-rank run"; continue; }
      for layout in "${layouts[@]}"; do
        # shellcheck disable=SC2086  # the flags and the layout are lists
        "$mpiexec" -n 4 $mpiflags "$kformer" "$deck" kernels.gemm=native train.steps=10 "${fam[@]}" $layout output.json="$tmp/l.json" \
          >"$tmp/l.log" 2>&1 || { fail "$precision $family $layout did not run"; tail -3 "$tmp/l.log"; continue; }
        /usr/bin/python3 "$src/tests/miniapp/same_training.py" "$one" "$tmp/l.json" "$precision $family $layout" \
          --precision "$precision" || fails=$((fails + 1))
      done
      [ "$family" = llama ] || continue
      # op on TP (the output projection's all-reduce re-run) with PP, and under ZeRO-3 (gathered weights)
      for layout in "train.recompute=op parallel.tp=2 parallel.pp=2" "train.recompute=op parallel.dp=2 parallel.pp=2 parallel.zero=3"; do
        # shellcheck disable=SC2086  # the flags and the layout are lists
        "$mpiexec" -n 4 $mpiflags "$kformer" "$deck" kernels.gemm=native train.steps=10 "${fam[@]}" $layout output.json="$tmp/l.json" \
          >"$tmp/l.log" 2>&1 || { fail "$precision $family $layout did not run"; tail -3 "$tmp/l.log"; continue; }
        /usr/bin/python3 "$src/tests/miniapp/same_training.py" "$one" "$tmp/l.json" "$precision $family $layout" \
          --precision "$precision" || fails=$((fails + 1))
      done
    done
  done
fi
[ $fails -eq 0 ] && echo "recompute: all checks passed"
exit $((fails > 0))
