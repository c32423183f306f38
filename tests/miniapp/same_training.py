#!/usr/bin/env python3
"""Two runs' reports hold the same training: each compared iteration's loss and gradient norm
within bounds derived from the rounding a layout (or a feature, or a resume at another layout) may
change. The multi-rank tests (layouts, sequence parallelism, recomputation, strict pipelines,
checkpoints) call it so that the bounds and their reasons live here once.

    same_training.py BASE.json OTHER.json NAME [--precision fp32|bf16] [--after K] [--activations-cut X]

Every iteration OTHER has is compared with BASE's iteration of the same number (BASE must have it);
the runs are taken to have last agreed bitwise after iteration K (0: from the start; a resumed run:
the checkpoint's iteration), so iteration i is held to (i - K) steps' worth of rounding.

The bounds (u: the unit roundoff of the type whose rounding differs between the two runs):
- fp32, u = 2^-24. A layout adds the same terms in another order: a TP rank's share of a GEMM's
  inner sum, the ranks' and micro-batches' shares of the loss and of each gradient. Under the
  probabilistic model of rounding (Higham and Mary, 2019) a sum of n terms carries a relative error
  of about sqrt(n) u, so two orders of the sums over the M tokens of a global batch (the longest
  sum the layouts reorder: M = 256 in tiny.yaml) differ by up to 2 sqrt(M) u (32 u) in each
  gradient element and in their norm. The loss is the mean of M token losses whose own errors are
  independent: 4 u. Each later step adds its own rounding at most once more (AdamW moves a parameter
  by about lr at most, whatever the rounding of its gradient): step s is held to s times step 1's.
- bf16, u = 2^-8. An fp32 value that a reordering moved by ~2^-24 crosses a bf16 rounding boundary
  with probability ~2^-16 and then moves by u: a few elements of a step's activations. On a mean over
  M tokens that is about u / sqrt(M) (u / 16) in the loss, and u in the gradient norm (a gradient
  element takes its bf16 inputs whole); again s times that at step s.
A gradient off by a constant factor (a data-parallel mean taken as a sum, a TP norm counting
replicated parameters twice) fails the gradient-norm bound at once, where gradient clipping at every
step leaves the losses within theirs.
"""
import argparse
import json
import sys

def per_step(precision, tokens):
    """(loss, gradient norm) relative bounds of one step's rounding over `tokens` tokens a batch."""
    m = float(tokens) ** 0.5
    if precision == "fp32":
        return 4 * 2.0 ** -24, 2 * m * 2.0 ** -24
    return 2.0 ** -8 / m, 2.0 ** -8


def compare(base, other, precision, after):
    """(ok, text): every iteration of `other` against `base`'s of the same number."""
    by_it = {r["iteration"]: r for r in base["iterations"]}
    t = base["config"]["train"]
    loss_step, grad_step = per_step(precision, t["global_batch"] * t["seq_len"])
    worst, ok, checked = {}, True, 0
    for r in other["iterations"]:
        i = r["iteration"]
        if i not in by_it or i <= after:
            return False, f"iteration {i} is not one both runs compare (base has {sorted(by_it)}, after {after})"
        steps = i - after
        for key, step in (("loss", loss_step), ("grad_norm", grad_step)):
            a = by_it[i][key]
            rel = abs(r[key] - a) / abs(a) if a else abs(r[key])
            bound = steps * step
            if key not in worst or rel / bound > worst[key][0] / worst[key][1]:
                worst[key] = (rel, bound, i)
            ok = ok and rel <= bound
        checked += 1
    if not checked:
        return False, "no iteration to compare"
    text = "  ".join(f"{k} {w[0]:.1e}{'<=' if w[0] <= w[1] else '>'}{w[1]:.1e} (it {w[2]})" for k, w in worst.items())
    return ok, f"{checked} iterations, closest to its bound: {text}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("base")
    p.add_argument("other")
    p.add_argument("name")
    p.add_argument("--precision", choices=("bf16", "fp32"), default="fp32")
    p.add_argument("--after", type=int, default=0, help="the iteration after which the runs may differ")
    p.add_argument("--activations-cut", type=float, default=0,
                   help="also: base's measured activation bytes at least this many times other's")
    a = p.parse_args()
    base, other = (json.load(open(f)) for f in (a.base, a.other))
    ok, text = compare(base, other, a.precision, a.after)
    if a.activations_cut:
        cut = (base["summary"]["memory"]["activation_bytes_measured"] /
               other["summary"]["memory"]["activation_bytes_measured"])
        ok = ok and cut >= a.activations_cut
        text += f"  activations / {cut:.2f} of the base's (>= {a.activations_cut:.1f})"
    print(f"{'ok  ' if ok else 'FAIL'} {a.name:54s} {text}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
