#!/usr/bin/env python3
# Summarises kformer-comm-bench --json runs of one rank count as a Markdown table for
# docs/perf-comm.md: per collective, busbw at the largest size, vs_mpi over sizes >= 1 MiB (the
# median over runs at each size, then the median and minimum over sizes; one run is noise on an
# oversubscribed machine), and the Hockney fit (median over runs).
#   python3 bench/comm/summarize.py run1.json run2.json ...
import json, sys, statistics as st
files = sys.argv[1:]
runs = [json.load(open(f)) for f in files]
colls = []
by = {}
for d in runs:
    for r in d['records']:
        if r['collective'] not in colls: colls.append(r['collective'])
        by.setdefault((r['collective'], r['bytes']), []).append(r)
print("| collective | busbw at the largest size (GB/s) | raw MPI busbw there (GB/s) | vs_mpi >= 1 MiB: median | min | sizes < 0.95 | alpha (us) | beta (GB/s) |")
print("|---|---|---|---|---|---|---|---|")
allv = []
for c in colls:
    ks = sorted(k for k in by if k[0] == c and k[1] >= 1 << 20)
    meds = [st.median([r['vs_mpi'] for r in by[k]]) for k in ks]
    allv += meds
    big = by[max(ks)]
    fits = [d['hockney'][c] for d in runs if c in d['hockney']]
    a = st.median([f['alpha_us'] for f in fits]); b = st.median([f['beta_gbytes_per_s'] for f in fits])
    low = [f"{k[1]>>20} MiB ({m:.2f})" for k, m in zip(ks, meds) if m < 0.95]
    print(f"| {c} | {st.median([r['busbw'] for r in big]):.3f} | {st.median([r['mpi_busbw'] for r in big]):.3f} | "
          f"{st.median(meds):.3f} | {min(meds):.3f} | {', '.join(low) or '-'} | {a:.2f} | {b:.3f} |")
print(f"\nAll collectives, sizes >= 1 MiB: median vs_mpi {st.median(allv):.3f}, "
      f"{sum(v >= 0.95 for v in allv)} of {len(allv)} (collective, size) points >= 0.95")
