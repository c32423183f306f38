"""What published runs say of memory, against `kformer predict`'s peak per rank (validate_published.py).

Three kinds of evidence, from scripts/published_runs.yaml:
- rows with `measured_peak_gib`: the peak per rank the source published (GiB, 2^30 bytes), set against
  the report's predicted peak (its estimate and the profile's process baseline); the median absolute
  error is held to the file's `memory_bound_pct`, a bound that only tightens;
- `memory_facts`: layouts the source says ran out of memory, which predict must say do not fit;
- every row ran: where predict counts the software's own memory (predict.memory, e.g. composer_mpt for
  the llm-foundry-2023 preset), each must fit, and --check fails on one that does not; elsewhere the peak
  is kformer's own step at the row's layout, and how many of those would not fit is a count, not a check.
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


def counted_as(report):
    """Whose memory the report's peak is: "kformer" (its own step) or predict.memory's software."""
    return report["summary"]["memory"].get("counted_as", "kformer")


def ran_lines(rows, reports):
    """Every row ran: the lines, and a problem for each whose software's memory predict counts but says
    does not fit."""
    own, software, problems = {}, {}, []
    for r in rows:
        rep = reports.get(r["id"])
        if rep is None:
            continue
        counts = own if counted_as(rep) == "kformer" else software
        n = counts.setdefault(r["source"], [0, 0])
        n[0] += not fits(rep)
        n[1] += 1
        if counts is software and not fits(rep):
            mem = rep["summary"]["memory"]
            problems.append(f"{r['id']} ran in {r['source']}, but predict's {counted_as(rep)} count says it does not fit "
                            f"({mem['peak_bytes'] / 1e9:.1f} GB of {mem['device_bytes'] / 1e9:.1f})")

    def summary(by_source):
        total = [sum(v[0] for v in by_source.values()), sum(v[1] for v in by_source.values())]
        detail = ", ".join(f"{s} {v[0]} of {v[1]}" for s, v in sorted(by_source.items()) if v[0])
        return f"{total[0]} of {total[1]}" + (f" ({detail})" if detail else "")

    text = ""
    if software:
        text += (f"Rows that ran, counted as their software holds memory (predict.memory), that predict says would "
                 f"not fit (guarded: none): {summary(software)}.\n")
    if own:
        text += (f"Rows that ran whose layout kformer's own step would not fit (its peak, not the software's): "
                 f"{summary(own)}.\n")
    return text, problems


def largest_fit_line(rows, reports):
    """Each row's micro-batch against the largest that predict finds fits (predict.largest_micro_batch), over
    the rows whose per-rank batch allowed a larger one, by whose memory predict counts: a count, not a check
    (a row that ran a larger one does not fit, which ran_lines guards)."""
    by = {}
    for r in rows:
        rep = reports.get(r["id"])
        lf = rep["summary"]["memory"].get("largest_micro_batch") if rep else None
        mb = r.get("deck", {}).get("train.micro_batch", 1)
        if not lf or lf["local_batch"] <= mb:
            continue
        n = by.setdefault(counted_as(rep), [0, 0, 0])
        n[0 if lf["micro_batch"] == mb else 1 if lf["micro_batch"] > mb else 2] += 1
    if not by:
        return ""
    parts = [f"{'kformer' + chr(39) + 's own step' if k == 'kformer' else k}: {v[0]} of {sum(v)} ran the largest, {v[1]} a "
             f"smaller one, {v[2]} a larger one" for k, v in sorted(by.items())]
    return ("The micro-batch each row ran against the largest predict finds fits (predict.largest_micro_batch), where "
            "the row's sequences a data-parallel rank allowed a larger one: " + "; ".join(parts) + ".\n")


def memory_section(runs, reports):
    """The lines validate_published prints after its table, and the problems --check reports."""
    line1, p1 = measured_lines(runs["rows"], reports, runs.get("memory_bound_pct", 0))
    line2, p2 = fact_lines(runs.get("memory_facts") or [], reports)
    line3, p3 = ran_lines(runs["rows"], reports)
    return line1 + line2 + line3 + largest_fit_line(runs["rows"], reports), p1 + p2 + p3
