#!/usr/bin/env bash
# jobscripts/local.sh end to end: a 4-point sweep on 4 ranks (plus one skipped and one failing
# point), then the CSV and the PNG plots. Exit 77 (skipped) without Debian's matplotlib.
#   usage: tests/jobscripts/study_test.sh KFORMER SOURCE_DIR
set -euo pipefail
bin=$1
src=$(cd "$2" && pwd)
py=/usr/bin/python3
"$py" -c 'import matplotlib, numpy' 2>/dev/null || { echo "study_test: $py has no matplotlib/numpy (apt install python3-matplotlib)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

KFORMER_BIN=$bin RESULTS=$tmp STUDY=tests/jobscripts/study.json NP=4 PYTHON=$py \
  "$src/jobscripts/local.sh" > "$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; fail "local.sh exited non-zero"; }
out=$(find "$tmp" -maxdepth 1 -type d -name 'local-study-*' | head -1)
[ -n "$out" ] || { cat "$tmp/out.txt"; echo "FAIL: no results folder local-study-* under $tmp" >&2; exit 1; }
grep -q "sweep: skip p002 layout=3x1x1: layout 3x1x1 needs 3 ranks, the job has 4" "$tmp/out.txt" || fail "the 3x1x1 layout was not skipped with a message"
grep -q "sweep: failed p005 .*kformer: error: .*bandwidth" "$tmp/out.txt" || fail "the invalid point was not reported with kformer's error"
grep -q "sweep: 4/5 points ok, 1 skipped" "$tmp/out.txt" || fail "expected 4 of 5 points ok"
for p in p000 p001 p003 p004; do
  [ -s "$out/$p.json" ] || fail "no report $p.json"
  [ -s "$out/$p.log" ] || fail "no log $p.log"
done
for f in points.json results.csv environment.txt sweep.log; do [ -s "$out/$f" ] || fail "no $f"; done
for png in layout straggler comm; do
  head -c 8 "$out/plots/$png.png" 2>/dev/null | grep -q PNG || fail "plots/$png.png missing or not a PNG"
done
grep -q "plots: skip bubble.png" "$tmp/out.txt" || fail "bubble.png neither drawn nor skipped with a message"
# The CSV: one row per point, statuses as run, the summary columns filled on the good rows.
"$py" - "$out/results.csv" <<'PY' || fail "results.csv content (above)"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
st = [r["status"] for r in rows]
assert st == ["ok", "ok", "skipped", "ok", "ok", "failed"], st
for r in rows:
    if r["status"] == "ok":
        assert float(r["summary.step_ms_median"]) > 0 and float(r["summary.model_tflops_per_rank"]) > 0, r
        assert r["mesh.world"] == "4", r
assert [r["mesh.layout"] for r in rows[:2]] == ["1x1x4", "2x1x2"], rows[:2]
assert [r["straggler.slowdown"] for r in rows[3:5]] == ["1.0", "2.0"], rows[3:5]
# The straggler point: rank 1 slept at least its own compute again (slowdown 2; sleep_for never
# wakes early), and the unperturbed point slept nowhere. Which rank the timed figures name the
# slowest is the study's result, not a test's: 4 ranks time-share 2 cores here.
assert rows[4]["summary.straggler.injected_rank"] == "1", rows[4]
assert float(rows[4]["summary.straggler.injected_slept_ms"]) >= float(rows[4]["summary.straggler.injected_compute_ms"]) > 0, rows[4]
assert rows[3]["summary.straggler.injected_rank"] == "-1", rows[3]
PY
[ "$fails" -eq 0 ] || { cat "$tmp/out.txt"; echo "study_test: $fails failure(s)" >&2; exit 1; }
echo "study_test: sweep, CSV and plots OK ($out)"
