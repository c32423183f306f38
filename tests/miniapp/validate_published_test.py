#!/usr/bin/env python3
"""scripts/validate_published.py's guards without kformer: a shown source's bound over all its rows or
per machine (`by_machine`: above it fails, more than a point under it fails, a machine without rows
fails), and the paired rows' line (`pairs_with`: each row's predicted-over-measured ratio over its
partner's, whose median, range and count it prints; a row without a prediction leaves its pair out),
and the --scale what-if: a profile's compute rates (GEMM curves, attention rates, measured points'
times) or memory rates (the copy, the memory-bound families) scaled, the other kind untouched, and bad
--scale input one line with exit 2; and what the sources say of memory (scripts/published_memory.py): a
published peak against the predicted one in GiB, held to memory_bound_pct (above fails, more than a point
under fails), a layout published as out of memory fails when predicted to fit, and the count of rows that
ran but whose layout kformer's own step would not fit."""
import copy
import importlib.util
import os
import subprocess
import sys

top = sys.argv[1]
spec = importlib.util.spec_from_file_location("vp", os.path.join(top, "scripts", "validate_published.py"))
vp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vp)

# shown: (source, machine, steady) -> signed errors
shown = {("s", "a100", True): [-0.10, -0.12, -0.14], ("s", "h100", True): [-0.25, -0.27, -0.30]}
assert vp.shown_bound_problems(shown, {"s": {"by_machine": {"a100": 12, "h100": 27.5}}}) == []
p = vp.shown_bound_problems(shown, {"s": {"by_machine": {"a100": 11, "h100": 27.5}}})
assert len(p) == 1 and "on a100 are off by 12.0%" in p[0] and "at most 11" in p[0], p
p = vp.shown_bound_problems(shown, {"s": {"by_machine": {"a100": 14, "h100": 27.5}}})
assert len(p) == 1 and "lower it" in p[0] and "a100" in p[0], p
p = vp.shown_bound_problems(shown, {"s": {"by_machine": {"a100": 12, "h100": 27.5, "v100": 5}}})
assert len(p) == 1 and "v100" in p[0] and "none is shown" in p[0], p
# one bound over both machines: the median of all six (|-0.14| and |-0.25| around the middle)
assert vp.shown_bound_problems(shown, {"s": {"bound_pct": 20}}) == []
p = vp.shown_bound_problems(shown, {"s": {"bound_pct": 19}})
assert len(p) == 1 and "19.5%" in p[0], p
assert "drop its line" in vp.shown_bound_problems(shown, {"t": {"bound_pct": 5}})[0]

rows = [{"id": "A1", "source": "s", "machine": "a100"}, {"id": "A2", "source": "s", "machine": "a100"},
        {"id": "H1", "source": "s", "machine": "h100", "pairs_with": "A1"},
        {"id": "H2", "source": "s", "machine": "h100", "pairs_with": "A2"},
        {"id": "H3", "source": "s", "machine": "h100", "pairs_with": "A3"}]  # no partner: left out
line = vp.paired_lines(rows, {"A1": 0.9, "A2": 0.8, "H1": 0.72, "H2": 0.72, "H3": 0.5})
assert line.count("\n") == 1 and "s's rows on h100 against the same layouts on a100" in line, line
assert "median 0.850, 0.800 to 0.900 (2 pairs)" in line, line
assert vp.paired_lines(rows, {"A1": 0.9, "H2": 0.7}) == ""  # a prediction missing on either side
profile = {"copy_gbps": 3000, "memory_bound": {"norm": 2000, "residual": 2500},
           "gemm": {"peak_tflops": 60, "max_efficiency": 0.8, "points": [{"forward_us": 10.0, "backward_us": 20.0}]},
           "attention": {"naive_tflops": 5.0, "fused_tflops": 10},
           "bf16": {"gemm": {"peak_tflops": 1000, "max_efficiency": 0.8},
                    "attention": {"flash2_tflops": {1024: 200, 4096: 300}, "cudnn_forward_tflops": 400,
                                  "batched_gemm_tflops": {64: {1024: 70}, 128: 100},
                                  "points": [{"forward_us": 5.0, "backward_us": 8.0}]},
                    "memory_gbps": {"norm": 1500}}}
before = copy.deepcopy(profile)
c = vp.scaled_profile(profile, "compute", 0.5)
assert profile == before  # the input is left alone
assert c["gemm"]["max_efficiency"] == 0.4 and c["bf16"]["gemm"]["max_efficiency"] == 0.4, c
assert c["gemm"]["points"][0] == {"forward_us": 20.0, "backward_us": 40.0}, c
assert c["attention"] == {"naive_tflops": 2.5, "fused_tflops": 5.0}, c
a = c["bf16"]["attention"]
assert a["flash2_tflops"] == {1024: 100, 4096: 150} and a["cudnn_forward_tflops"] == 200, a
assert a["batched_gemm_tflops"] == {64: {1024: 35}, 128: 50}, a
assert a["points"][0] == {"forward_us": 10.0, "backward_us": 16.0}, a
assert c["copy_gbps"] == 3000 and c["memory_bound"] == before["memory_bound"]
assert c["bf16"]["memory_gbps"] == {"norm": 1500}
m = vp.scaled_profile(profile, "memory", 0.5)
assert m["copy_gbps"] == 1500 and m["memory_bound"] == {"norm": 1000, "residual": 1250}, m
assert m["bf16"]["memory_gbps"] == {"norm": 750} and m["bf16"]["gemm"] == before["bf16"]["gemm"], m
assert m["bf16"]["attention"] == before["bf16"]["attention"], m

pm = vp.published_memory
GIB = 2.0 ** 30
rep = lambda peak_gib, fits: {"summary": {"memory": {"peak_bytes": peak_gib * GIB, "device_bytes": 85.1e9}},
                              "predicted": {"fits": fits}}
rows = [{"id": "R1", "source": "s", "measured_peak_gib": 80.0}, {"id": "R2", "source": "s", "measured_peak_gib": 50.0},
        {"id": "R3", "source": "t"}]
reports = {"R1": rep(72.0, True), "R2": rep(55.0, True), "R3": rep(90.0, False), "O1": rep(100.0, False)}
line, p = pm.measured_lines(rows, reports, 10.5)  # -10% and +10%: median 10.0%
assert p == [] and "R1 72.0 predicted, 80.0 published (-10.0%)" in line and "median absolute error 10.0%" in line, line
assert "at most 9" in pm.measured_lines(rows, reports, 9)[1][0]
assert "lower it" in pm.measured_lines(rows, reports, 11.5)[1][0]
assert pm.measured_lines([rows[2]], reports, 10.5) == ("", [])  # no row publishes a peak: nothing said
facts = [{"id": "O1", "source": "s", "what": "a big one"}]
line, p = pm.fact_lines(facts, reports)
assert p == [] and "O1 (a big one) 107.4 GB of 85.1: does not fit" in line, line
line, p = pm.fact_lines(facts, {"O1": rep(70.0, True)})
assert len(p) == 1 and "ran out of memory in s, but predict says it fits" in p[0], p
assert pm.ran_lines(rows, reports) == ("Rows that ran whose layout kformer's own step would not fit (its peak, not "
                                       "the software's): 1 of 3 (t 1 of 1).\n", []), pm.ran_lines(rows, reports)
# A row whose software's memory predict counts (predict.memory) must fit: one that ran and does not is a problem.
sw = lambda peak_gib, fits: {**rep(peak_gib, fits), "summary": {"memory": {"peak_bytes": peak_gib * GIB, "device_bytes": 85.1e9,
                                                                           "counted_as": "composer_mpt"}}}
text, p = pm.ran_lines(rows, {"R1": sw(70.0, True), "R2": sw(90.0, False), "R3": rep(90.0, False)})
assert len(p) == 1 and p[0].startswith("R2 ran in s, but predict's composer_mpt count says it does not fit"), p
assert "(guarded: none): 1 of 2 (s 1 of 2)" in text and "kformer's own step would not fit" in text and "1 of 1 (t 1 of 1)" in text, text
# The micro-batch each row ran against predict's largest fit, counted by whose memory, over rows that allowed a larger one.
lf = lambda counted, local, best: {"summary": {"memory": {"counted_as": counted, "largest_micro_batch": {
    "local_batch": local, "micro_batch": best}}}}
runs_lf = [{"id": "A", "deck": {"train.micro_batch": 4}}, {"id": "B", "deck": {"train.micro_batch": 2}},
           {"id": "C", "deck": {"train.micro_batch": 8}}, {"id": "D", "deck": {"train.micro_batch": 8}}]
line = pm.largest_fit_line(runs_lf, {"A": lf("composer_mpt", 16, 4), "B": lf("composer_mpt", 16, 8),
                                     "C": lf("kformer", 8, 8), "D": lf("kformer", 32, 4)})
assert "composer_mpt: 1 of 2 ran the largest, 1 a smaller one, 0 a larger one" in line, line
assert "kformer's own step: 0 of 1 ran the largest, 0 a smaller one, 1 a larger one" in line, line  # C: no larger one allowed
text, p = pm.memory_section({"rows": rows, "memory_bound_pct": 10.5, "memory_facts": facts}, reports)
assert p == [] and text.count("\n") == 3, text

script = os.path.join(top, "scripts", "validate_published.py")
for bad, says in ((["--scale", "h100-sxm-80gb:clock=0.9"], "KIND is one of"),
                  (["--scale", "h100-sxm-80gb=0.9"], "give MACHINE"),
                  (["--scale", "no-such-gpu:compute=0.9"], "MACHINE a profile"),
                  (["--scale", "h100-sxm-80gb:compute=0.9", "--check"], "what-if")):
    r = subprocess.run([sys.executable, script, "--kformer", "/nonexistent", *bad], capture_output=True, text=True)
    assert r.returncode == 2 and says in r.stderr and r.stderr.count("\n") == 1, (bad, r.returncode, r.stderr)
print("validate_published guards: ok")
