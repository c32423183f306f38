#!/usr/bin/python3
"""A machine profile's eager_host section from a kept run of bench/eager_op_cost.py (issue 37, item 5).

    scripts/eager_host_section.py EAGER_JSON [--from SECTION] [--check PROFILE]

EAGER_JSON is the bench's output (docs/gpu-runs/DATE-GPU/eager/eager_op_cost.json). --from names the
figures a machine's eager runs are made of: `eager_host` (the plain tiny Llama, the default) or a
section under `tp_plan` (`tp_plan.tp_plan_fsdp1`: ezpz's plan inside FSDP1, seed note 001's runs).
The layer's figures, and where the run has them the model's top and AdamW's step, come from that
section; the blocking ones from `eager_host` (CUDA_LAUNCH_BLOCKING=1 is timed on the plain layer
only). Prints the section, its source line made from the run (date, GPU, host CPU, torch).

--check PROFILE: instead, exit 1 naming each figure of PROFILE's eager_host that is not the run's
(to 0.1 us, the profiles' rounding), so that a profile's figures stay traceable to a kept run.
"""
import argparse
import json
import os
import re
import sys

import yaml

LAYER = ("layer_forward_us", "layer_backward_us")
BESIDE = ("top_forward_us", "top_backward_us", "optimizer_us")


def figures(run, section):
    node = run
    for part in section.split("."):
        if not isinstance(node, dict) or part not in node:
            sys.exit(f"eager_host_section: the run has no section '{section}' (it has: {', '.join(run)})")
        node = node[part]
    if "layer_forward_us" not in node:
        sys.exit(f"eager_host_section: '{section}' has no layer figures: {node.get('skipped', node)}")
    out = {k: node[k] for k in LAYER + BESIDE if k in node}
    plain = run.get("eager_host", {})
    for k in LAYER:
        if "blocking_" + k in plain:
            out["blocking_" + k] = plain["blocking_" + k]
    return out


def source(run, path, section):
    date = re.search(r"\d{4}-\d{2}-\d{2}", os.path.abspath(path))
    where = run.get("gpu", run.get("device", "?"))
    return (f"bench/eager_op_cost.py, {date.group(0) if date else 'undated'}, {where}, host "
            f"{run.get('host_cpu', '?')}, torch {run.get('torch', '?')} ({section}; blocking: the plain layer)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--from", dest="section", default="eager_host")
    ap.add_argument("--check", metavar="PROFILE")
    a = ap.parse_args()
    with open(a.run) as f:
        run = json.load(f)
    fig = figures(run, a.section)
    if a.check:
        with open(a.check) as f:
            prof = (yaml.safe_load(f) or {}).get("eager_host")
        if not prof:
            sys.exit(f"eager_host_section: {a.check} has no eager_host section")
        bad = [f"{k}: {prof.get(k)} in the profile, {v:.1f} in the run" for k, v in fig.items()
               if prof.get(k) is not None and abs(prof[k] - v) > 0.05]
        missing = [k for k in LAYER if k not in prof]
        if bad or missing:
            print(f"eager_host_section: {a.check} is not {a.run} ({a.section}): " + "; ".join(bad + missing))
            return 1
        print(f"eager_host_section: {a.check}'s eager_host is {a.run}'s {a.section} "
              f"({', '.join(k for k in fig if k in prof)})")
        return 0
    print(f"eager_host:   # {a.run}, its {a.section} figures")
    for k, v in fig.items():
        print(f"  {k}: {v:.1f}")
    print(f'  source: "{source(run, a.run, a.section)}"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
