#!/usr/bin/env python3
"""scripts/validate_published.py's guards without kformer: a shown source's bound over all its rows or
per machine (`by_machine`: above it fails, more than a point under it fails, a machine without rows
fails), and the paired rows' line (`pairs_with`: each row's predicted-over-measured ratio over its
partner's, whose median, range and count it prints; a row without a prediction leaves its pair out)."""
import importlib.util
import os
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
print("validate_published guards: ok")
