#!/usr/bin/python3
"""scripts/attention_size.py --check: the H100 and H200 profiles' half_rate_share against the lent
H200's timings of calls smaller than the flash charts' (docs/gpu-runs/2026-12-04-h200/flash), each
within 15%; and the same profile without it (the charted rate at every size) fails that check, so the
check can tell. Usage: attention_size_test.py SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile

import yaml

src = sys.argv[1]
script = os.path.join(src, "scripts", "attention_size.py")
rates = os.path.join(src, "docs", "gpu-runs", "2026-12-04-h200", "flash", "flash2_rate.json")
profiles = [os.path.join(src, "input", "machines", f) for f in ("h100-sxm-80gb.yaml", "h200-sxm-141gb.yaml")]
p = subprocess.run(["/usr/bin/python3", script, rates, *profiles, "--check"], capture_output=True, text=True)
print(p.stdout)
if p.returncode != 0:
    sys.exit(f"FAIL: the shipped profiles: exit {p.returncode}: {p.stderr}")
with tempfile.TemporaryDirectory() as tmp:
    prof = yaml.safe_load(open(profiles[0]))
    del prof["bf16"]["attention"]["half_rate_share"]
    bare = os.path.join(tmp, "charted.yaml")
    yaml.safe_dump(prof, open(bare, "w"))
    q = subprocess.run(["/usr/bin/python3", script, rates, bare, "--check"], capture_output=True, text=True)
    if q.returncode != 1 or "more than 15% off" not in q.stderr:
        sys.exit(f"FAIL: a profile without half_rate_share passed the check (exit {q.returncode}): {q.stderr}")
print("attention_size: the profiles' small-call rates within 15% of the H200's timings; the charted rate alone is not")
