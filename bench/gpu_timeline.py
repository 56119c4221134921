#!/usr/bin/env python3
"""Where a GPU step's time goes, from a kernel trace (bench/cupti/kernel_trace.cpp writes one:
start_ns,end_ns,name per kernel, kernels inside CUDA graphs included).

    bench/gpu_timeline.py trace.csv --steps N --per-step K [--top 15]

Looks at the last N*K kernels of the capture (the last N steps of K kernels each). Prints the kernels' total time, the time the GPU was busy (the union of kernel intervals, so
overlap is counted once), the span from first to last kernel, and the kernels with the most
total time, each per step (N: the steps the capture ran)."""
import argparse
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--per-step", type=int, required=True, help="kernels per step")
    a = ap.parse_args()
    with open(a.trace) as f:
        rows = sorted((int(r["start_ns"]), int(r["end_ns"]), r["name"]) for r in csv.DictReader(f))
    if not rows:
        raise SystemExit("no kernels in the capture")
    rows = rows[-a.steps * a.per_step:]
    total = sum(e - s for s, e, _ in rows)
    busy, cur_s, cur_e = 0, rows[0][0], rows[0][1]
    for s, e, _ in rows[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    span = rows[-1][1] - rows[0][0]
    n = a.steps
    print(f"kernels: {len(rows) / n:.1f} per step")
    print(f"kernel time: {total / n / 1e3:.2f} us/step; GPU busy: {busy / n / 1e3:.2f} us/step; "
          f"span: {span / n / 1e3:.2f} us/step (busy {100 * busy / span:.0f}% of the span)")
    by_name = {}
    for s, e, name in rows:
        t, c = by_name.get(name, (0, 0))
        by_name[name] = (t + e - s, c + 1)
    print(f"\n| kernel | us/step | launches/step | mean us |\n|---|---:|---:|---:|")
    for name, (t, c) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"| {name[:60]} | {t / n / 1e3:.2f} | {c / n:.1f} | {t / c / 1e3:.2f} |")


if __name__ == "__main__":
    main()
