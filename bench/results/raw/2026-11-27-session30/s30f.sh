#!/usr/bin/env bash
# Session 30 call 6: why a merged step costs more than the hand-written persistent kernels.
# Scratch KILN_SCRATCH_REPEAT_PARAMS: 0 as committed (each step reads its Params from the
# kernel's parameter array at a dynamic index), 1 copies each step's Params into shared memory
# first, 2 unrolls the steps' loop (constant indices). ncu durations of the merged kernels in the
# merged-launch tests, each mode with its own kernel cache.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
export PATH=/usr/local/cuda/bin:$PATH
for m in 0 1 2; do
  KILN_SCRATCH_REPEAT_PARAMS=$m KILN_CACHE_DIR=/tmp/kc-$m KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_filter='MergedLaunchGpu.*' > /tmp/o/t$m.out 2>&1
  echo "mode $m tests rc=$?"; grep -E "^\[  (PASSED|FAILED) " /tmp/o/t$m.out
  KILN_SCRATCH_REPEAT_PARAMS=$m KILN_CACHE_DIR=/tmp/kc-$m timeout 120 ncu --metrics gpu__time_duration.sum,launch__registers_per_thread --csv build-gpu/tests/kiln_tests --gtest_filter='MergedLaunchGpu.*' > /tmp/o/ncu-$m.csv 2>/tmp/o/ncu-$m.err
  echo "mode $m ncu rc=$? $(( $(date +%s) - t0 )) s"
  python3 - /tmp/o/ncu-$m.csv <<'PY'
import csv, sys, collections, statistics
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit"); mi = hdr.index("Metric Name")
d = collections.defaultdict(list); regs = {}
for r in rows[1:]:
    v = float(r[vi].replace(",", ""))
    if r[mi] == "launch__registers_per_thread": regs[r[ki][:70]] = v; continue
    d[r[ki][:70]].append(v / 1000 if r[ui] in ("nsecond", "ns") else v)
for k, v in sorted(d.items(), key=lambda kv: -len(kv[1])):
    print(f"{k:72s} n={len(v):4d} median {statistics.median(v):8.2f} us  min {min(v):8.2f}  regs {regs.get(k, 0):.0f}")
PY
done
tar czf $OUT/s30f.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
