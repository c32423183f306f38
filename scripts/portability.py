#!/usr/bin/python3
"""Performance portability of one deck over several platforms (Pennycook, Sewall and Lee).

    portability.py [NAME=]REPORT.json [NAME=]REPORT.json ... [--csv table.csv]

Each REPORT is kformer's JSON report (output.json=...) of the same deck on one platform
(backend x machine). A platform's architectural efficiency e is its achieved model FLOP/s over
the machine's measured ceiling: summary.mfu when the report has it, else
summary.model_tflops_per_rank / summary.gemm_ceiling_tflops. The metric over the platform set H is
the harmonic mean  PP = |H| / sum_i 1/e_i,  and 0 when any platform has no result (a missing or
unreadable report, or no ceiling to compare with). NAME defaults to the report's platform
(backend and device or host CPU) or the file name.
"""
import argparse
import csv
import json
import math
import os
import sys

SAME_DECK = ("model.", "train.", "parallel.")  # what must match for the comparison to mean anything
NOT_THE_WORK = ("train.steps",)  # how long a run went, not what its step does


def pennycook(effs):
    """Harmonic mean of the efficiencies; 0 if any platform is unsupported (None or <= 0)."""
    if not effs:
        raise ValueError("no platforms: PP needs at least one")
    if any(e is None or not math.isfinite(e) or e <= 0 for e in effs):
        return 0.0
    return len(effs) / sum(1.0 / e for e in effs)


def efficiency(summary):
    """(e, how it was found) from a report's summary; (None, why) when it cannot be found."""
    mfu = summary.get("mfu")
    if isinstance(mfu, (int, float)) and mfu > 0:
        return float(mfu), "mfu"
    achieved, ceiling = summary.get("model_tflops_per_rank"), summary.get("gemm_ceiling_tflops")
    if not isinstance(achieved, (int, float)):
        return None, "no summary.model_tflops_per_rank"
    if not isinstance(ceiling, (int, float)) or ceiling <= 0:
        return None, "no summary.gemm_ceiling_tflops or summary.mfu"
    return achieved / ceiling, "tflops/ceiling"


def flat_config(cfg, prefix=""):
    out = {}
    for k, v in cfg.items():
        if isinstance(v, dict):
            out.update(flat_config(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def platform(arg):
    """One command-line argument -> a dict with name, path, e, how, config, tflops, ceiling."""
    name, path = arg.split("=", 1) if "=" in arg and not os.path.exists(arg) else (None, arg)
    p = {"name": name or os.path.splitext(os.path.basename(path))[0], "path": path, "e": None,
         "how": "", "config": None, "tflops": None, "ceiling": None}
    try:
        with open(path) as f:
            rep = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        p["how"] = f"no result ({e.__class__.__name__}: {getattr(e, 'strerror', None) or e})"
        return p
    s, plat = rep.get("summary", {}), rep.get("platform", {})
    if not name and plat:
        where = plat.get("device") or plat.get("host_cpu") or plat.get("host")
        p["name"] = " ".join(str(x) for x in (plat.get("backend"), where) if x) or p["name"]
    p["e"], p["how"] = efficiency(s)
    p["tflops"], p["ceiling"] = s.get("model_tflops_per_rank"), s.get("gemm_ceiling_tflops")
    p["config"] = {k: v for k, v in flat_config(rep.get("config", {})).items()
                   if k.startswith(SAME_DECK) and k not in NOT_THE_WORK}
    return p


def deck_mismatch(plats):
    """The first deck key on which two readable reports differ, as a message, or None."""
    have = [p for p in plats if p["config"] is not None]
    for p in have[1:]:
        for k in sorted(set(have[0]["config"]) | set(p["config"])):
            if have[0]["config"].get(k) != p["config"].get(k):
                return (f"{k} is {have[0]['config'].get(k)!r} in {have[0]['path']} but "
                        f"{p['config'].get(k)!r} in {p['path']}")
    return None


def fmt(v, spec=".4g"):
    return "-" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("reports", nargs="+", metavar="[NAME=]REPORT.json")
    ap.add_argument("--csv", help="also write the table as CSV")
    ap.add_argument("--allow-mismatch", action="store_true",
                    help="compare reports whose model/train/parallel keys differ (warn only)")
    a = ap.parse_args()
    plats = [platform(r) for r in a.reports]
    why = deck_mismatch(plats)
    if why and not a.allow_mismatch:
        sys.exit(f"portability: the reports are not the same deck: {why}; "
                 "rerun with the same deck or pass --allow-mismatch")
    if why:
        print(f"portability: warning: not the same deck: {why}", file=sys.stderr)
    w = max(len("platform"), *(len(p["name"]) for p in plats))
    print(f"{'platform':<{w}}  {'efficiency':>10}  {'TFLOP/s/rank':>12}  {'ceiling':>8}  from")
    for p in plats:
        print(f"{p['name']:<{w}}  {fmt(p['e'], '.4f'):>10}  {fmt(p['tflops']):>12}  "
              f"{fmt(p['ceiling']):>8}  {p['how']}")
        if p["e"] is not None and p["e"] > 1:
            print(f"portability: warning: {p['name']} is above its ceiling (e={p['e']:.3f}): "
                  "the ceiling was measured low or under load", file=sys.stderr)
    pp = pennycook([p["e"] for p in plats])
    print(f"Pennycook PP over {len(plats)} platforms: {pp:.4f}"
          + ("" if pp else "  (0: a platform has no result)"))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            cw = csv.writer(f)
            cw.writerow(["platform", "report", "efficiency", "model_tflops_per_rank",
                         "gemm_ceiling_tflops", "source"])
            for p in plats:
                cw.writerow([p["name"], p["path"], p["e"], p["tflops"], p["ceiling"], p["how"]])
            cw.writerow(["PP", "", pp, "", "", f"harmonic mean over {len(plats)} platforms"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
