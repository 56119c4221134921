#!/usr/bin/env python3
"""Summarise an ncu --page source --csv --print-source sass dump: stall reasons in total and the
instructions with the most warp samples (with their stall split), in address order windows."""
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]
data = [r for r in rows[2:] if len(r) == len(hdr)]
ix = {h: i for i, h in enumerate(hdr)}
samp = ix["Warp Stall Sampling (All Samples)"]
stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
tot = {s: sum(int(r[ix[s]] or 0) for r in data) for s in stalls}
allsamp = sum(int(r[samp] or 0) for r in data)
print(f"{rows[0][1]}: {len(data)} instructions, {allsamp} samples")
for s, v in sorted(tot.items(), key=lambda x: -x[1])[:10]:
    print(f"  {s:28s} {v:6d} {100*v/max(allsamp,1):5.1f}%")
print("top instructions (index, samples, top stalls, sass):")
order = sorted(range(len(data)), key=lambda i: -int(data[i][samp] or 0))[:int(sys.argv[2]) if len(sys.argv) > 2 else 30]
for i in sorted(order):
    r = data[i]
    top = sorted(((int(r[ix[s]] or 0), s[6:]) for s in stalls), reverse=True)[:2]
    print(f"  {i:4d} {int(r[samp] or 0):5d} {' '.join(f'{n}:{v}' for v, n in top if v):30s} {r[ix['Source']].strip()[:80]}")
