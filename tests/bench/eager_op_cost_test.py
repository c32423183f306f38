#!/usr/bin/python3
"""bench/eager_op_cost.py on this CPU at its quick size (not a timed test: no figure's size is
checked, only that it is there and finite): it writes every figure a profile's eager_host section
takes; the operators it counts grow by the same number for each layer (8 layers against 4: a whole
multiple of 4, and at least a Llama layer's matmuls, norms and attention); AdamW steps over every
parameter tensor of the model; the layer under ezpz's plan has its top's and AdamW's figures beside
it, each derived from the raw times the JSON keeps."""
import json
import math
import os
import subprocess
import sys
import tempfile

top = sys.argv[1]
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "eager.json")
    r = subprocess.run(["/usr/bin/python3", os.path.join(top, "bench", "eager_op_cost.py"), "--device", "cpu",
                        "--quick", "--json", out], capture_output=True, text=True, timeout=300)
    print(r.stdout, r.stderr)
    if r.returncode != 0:
        sys.exit(f"FAIL: eager_op_cost.py exited {r.returncode}")
    with open(out) as f:
        res = json.load(f)

fails = []


def check(ok, what):
    if not ok:
        fails.append(what)


h = res["eager_host"]
for k in ("layer_forward_us", "layer_backward_us", "top_forward_us", "top_backward_us"):
    check(isinstance(h[k], float) and math.isfinite(h[k]), f"eager_host.{k} = {h[k]}: not a figure")
for k in ("op_async_us", "op_autograd_us", "op_sync_us"):
    check(math.isfinite(res[k]) and res[k] > 0, f"{k} = {res[k]}")  # a time, never 0
s8, s4 = res["step"], res["step_4_layers"]
check(s8["layers"] == 8 and s4["layers"] == 4, "the steps are not of 8 and 4 layers")
if "aten_ops" in s8:
    per4 = s8["aten_ops"] - s4["aten_ops"]
    check(per4 > 0 and per4 % 4 == 0, f"8 layers dispatch {s8['aten_ops']} operators, 4 layers {s4['aten_ops']}: "
                                       "not the same number per layer")
    check(per4 // 4 >= 20, f"{per4 // 4} operators per layer: fewer than a Llama layer's forward and backward")
for name in ("adamw_foreach", "adamw_per_tensor"):
    check(s8[name]["tensors"] == 2 + 6 * 8 + 1 and s8[name]["step_us"] > 0,
          f"{name}: {s8[name]} (embedding, head, final norm and 6 tensors per layer)")
check("dtensor" in res, "no dtensor entry (a figure or the reason it was skipped)")
# The layer under ezpz's tensor-parallel plan: the plain layer always measured; the planned ones
# measured or skipped with their reason (this machine's torch may lack the plan's API).
tp = res.get("tp_plan", {})
plain = tp.get("plain", {})
check(all(math.isfinite(plain.get(k, float("nan"))) for k in ("layer_forward_us", "layer_backward_us",
                                                               "top_forward_us", "top_backward_us")),
      f"tp_plan.plain: {plain}: not the plain layer's and top's figures")
# AdamW's step beside them, and the raw times every figure is derived from, again from those times
check(plain.get("optimizer_us", 0) > 0, f"tp_plan.plain: no AdamW step time ({plain.get('step_error')})")
t = plain.get("times_us", {})
if all(n in t and len(t[n]) == 3 for n in ("8", "4")):
    again = {"layer_forward_us": (t["8"]["forward"] - t["4"]["forward"]) / 4,
             "top_forward_us": 2 * t["4"]["forward"] - t["8"]["forward"],
             "optimizer_us": t["8"]["step"] - t["8"]["forward_backward"]}
    for k, v in again.items():
        check(abs(plain[k] - v) <= 1e-6 * max(1.0, abs(v)), f"tp_plan.plain.{k} {plain[k]} is not {v} of its raw times")
else:
    check(False, f"tp_plan.plain.times_us: {t}: not the forward, forward-backward and step at 8 and 4 layers")
for name in ("tp_plan", "tp_plan_fsdp1"):
    fig = tp.get(name, {})
    check(("layer_forward_us" in fig and math.isfinite(fig["layer_backward_us"])) or fig.get("skipped"),
          f"tp_plan.{name}: {fig}: neither figures nor the reason they were skipped")
if fails:
    sys.exit("FAIL: " + "; ".join(fails))
print("eager_op_cost: every figure present, operators per layer constant, the TP plan measured or its absence said")
