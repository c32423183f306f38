"""What published runs say of memory, against `kformer predict`'s peak per rank (validate_published.py).

Three kinds of evidence, from scripts/published_runs.yaml:
- rows with `measured_peak_gib`: the peak per rank the source published (GiB, 2^30 bytes), set against
  the report's predicted peak (its estimate and the profile's process baseline); the median absolute
  error is held to the file's `memory_bound_pct`, a bound that only tightens;
- `memory_facts`: layouts the source says ran out of memory, which predict must say do not fit;
- every row ran: how many of them kformer's own step would not fit, by source (a count, not a check:
  the peak is kformer's step at the row's layout, not the software's).
"""
import statistics

GIB = 2.0 ** 30
SLACK_PCT = 1.0  # a bound may sit at most this far above its median (it only tightens; validate_published's too)


def peak_bytes(report):
    return report["summary"]["memory"]["peak_bytes"]


def fits(report):
    return bool(report["predicted"]["fits"])


def measured_lines(rows, reports, bound):
    """The rows that publish a peak: a line, and the problems of the bound (none without such rows)."""
    got = [(r, reports[r["id"]]) for r in rows if "measured_peak_gib" in r and r["id"] in reports]
    if not got:
        return "", []
    errs, parts = [], []
    for r, rep in got:
        predicted = peak_bytes(rep) / GIB
        err = predicted / r["measured_peak_gib"] - 1
        errs.append(abs(err))
        parts.append(f"{r['id']} {predicted:.1f} predicted, {r['measured_peak_gib']:.1f} published ({100 * err:+.1f}%)")
    median = 100 * statistics.median(errs)
    line = ("Memory against published peaks per rank (GiB of 2^30 bytes): " + "; ".join(parts) +
            f"; median absolute error {median:.1f}% (guarded: at most {bound}%, scripts/published_runs.yaml's "
            "memory_bound_pct).\n")
    problems = []
    if median > bound:
        problems.append(f"the predicted peaks are off the published ones by {median:.1f}% (median; at most {bound}%)")
    elif bound - median > SLACK_PCT:
        problems.append(f"the predicted peaks are off the published ones by {median:.1f}% (median), more than "
                        f"{SLACK_PCT}% under memory_bound_pct ({bound}%): lower it in scripts/published_runs.yaml")
    return line, problems


def fact_lines(facts, reports):
    """The layouts published as out of memory: a line, and a problem for each predicted to fit."""
    if not facts:
        return "", []
    parts, problems = [], []
    for f in facts:
        rep = reports.get(f["id"])
        if rep is None:
            continue  # its prediction failed: validate_published counts it
        mem, fit = rep["summary"]["memory"], fits(rep)
        parts.append(f"{f['id']} ({f['what']}) {mem['peak_bytes'] / 1e9:.1f} GB of {mem['device_bytes'] / 1e9:.1f}: "
                     f"{'FITS' if fit else 'does not fit'}")
        if fit:
            problems.append(f"{f['id']} ({f['what']}) ran out of memory in {f['source']}, but predict says it fits")
    return "Published out of memory, predicted not to fit: " + "; ".join(parts) + ".\n", problems


def ran_line(rows, reports):
    """Every row ran: how many of them kformer's own step would not fit, by source."""
    by_source = {}
    for r in rows:
        if r["id"] in reports:
            n = by_source.setdefault(r["source"], [0, 0])
            n[0] += not fits(reports[r["id"]])
            n[1] += 1
    if not by_source:
        return ""
    total = [sum(v[0] for v in by_source.values()), sum(v[1] for v in by_source.values())]
    return (f"Rows that ran whose layout kformer's own step would not fit (its peak, not the software's): "
            f"{total[0]} of {total[1]} (" +
            ", ".join(f"{s} {v[0]} of {v[1]}" for s, v in sorted(by_source.items()) if v[0]) + ").\n")


def memory_section(runs, reports):
    """The lines validate_published prints after its table, and the problems --check reports."""
    line1, p1 = measured_lines(runs["rows"], reports, runs.get("memory_bound_pct", 0))
    line2, p2 = fact_lines(runs.get("memory_facts") or [], reports)
    return line1 + line2 + ran_line(runs["rows"], reports), p1 + p2
