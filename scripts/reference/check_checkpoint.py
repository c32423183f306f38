#!/usr/bin/python3
"""PyTorch reads a kformer universal checkpoint and continues the run it came from.

Reads model.safetensors and optimizer.safetensors with a few lines of Python (the format is an
8-byte header length, a JSON header, raw little-endian data), recomputes every tensor's xsum64
checksum with numpy and compares it with checkpoint.json, rebuilds the model from the deck stored
in the checkpoint, puts AdamW's moments into torch.optim.AdamW's state, and trains on from the
checkpoint's data position in float64. Every loss and gradient norm must match those of the
kformer run that resumed from the same checkpoint (its JSON report).

    check_checkpoint.py CHECKPOINT_DIR RESUMED_REPORT.json [--rtol 1e-5]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kformer_ref as ref  # noqa: E402


def xsum64(values):
    bits = np.ascontiguousarray(values, dtype=np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
    idx = np.arange(bits.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return int(ref.mix64((idx << np.uint64(32)) | bits).sum(dtype=np.uint64))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("report")
    ap.add_argument("--rtol", type=float, default=1e-5)
    a = ap.parse_args()
    d = a.checkpoint
    if not os.path.exists(os.path.join(d, "checkpoint.json")):
        d = os.path.join(d, open(os.path.join(d, "latest")).read().strip())
    meta = json.load(open(os.path.join(d, "checkpoint.json")))
    files = {f: ref.read_safetensors(os.path.join(d, f)) for f in ("model.safetensors", "optimizer.safetensors")}
    bad = 0
    for f, tensors in files.items():
        for name, arr in tensors.items():
            want = meta["files"][f]["tensors"][name]["xsum64"]
            got = f"{xsum64(arr):016x}"
            if got != want:
                print(f"{f} {name}: xsum64 {got}, checkpoint.json says {want}")
                bad += 1
    n = sum(len(t) for t in files.values())
    print(f"checksums: {n - bad}/{n} tensors match checkpoint.json")

    cfg = meta["deck"]
    model, opt = files["model.safetensors"], files["optimizer.safetensors"]
    s = ref.Shape(cfg)
    P, moments = {}, {}
    for name, _, _, _, _, decay in ref.param_specs(s):
        P[name] = (torch.tensor(model[name].astype(np.float64), requires_grad=True), decay)
        moments[name] = (opt["exp_avg." + name], opt["exp_avg_sq." + name])
    its = json.load(open(a.report))["iterations"]
    if its[0]["iteration"] != meta["iteration"] + 1:
        sys.exit(f"the report starts at iteration {its[0]['iteration']}, the checkpoint is at {meta['iteration']}")
    out = ref.train(cfg, len(its), (P, moments, meta["iteration"], meta["consumed_samples"]))
    bad += ref.compare(its, out, a.rtol)
    print("check_checkpoint: " + ("torch continues the checkpoint as kformer does" if bad == 0 else f"{bad} problem(s)"))
    return 1 if bad else 0


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    sys.exit(main())
