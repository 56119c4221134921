#!/usr/bin/env bash
# Session 30 call 4 (warm, build-gpu from call 3): the merged-launch tests and the reproducible
# LSTM training with KILN_MERGE_LAUNCHES=1 (it failed with cudaErrorInvalidClusterSize in
# call 2, before the occupancy check); then ncu's durations of the merged kernels and of the
# same steps launched alone, from the merged-launch tests.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
cmake --build build-gpu -j16 > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_filter='MergedLaunch*:Codegen.Merged*' > /tmp/o/merged.out 2>&1
echo "merged tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" -A3 /tmp/o/merged.out | head
KILN_MERGE_LAUNCHES=1 KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync build-gpu/tests/kiln_tests \
  --gtest_filter='Reproducible*:PlanCache*:AdaptiveLoopFlush*:Compile*' --gtest_brief=1 > /tmp/o/repro_merge.out 2>&1
echo "reproducible etc with merging rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure" -A3 /tmp/o/repro_merge.out | head -20
export PATH=/usr/local/cuda/bin:$PATH
for f in Seed Lstm; do
  timeout 150 ncu --metrics gpu__time_duration.sum --csv build-gpu/tests/kiln_tests --gtest_filter="MergedLaunchGpu.${f}*" > /tmp/o/ncu-$f.csv 2>/tmp/o/ncu-$f.err
  echo "ncu $f rc=$? $(( $(date +%s) - t0 )) s"
  python3 - /tmp/o/ncu-$f.csv <<'PY'
import csv, sys, collections, statistics
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
d = collections.defaultdict(list)
for r in rows[1:]:
    if r[ui] in ("nsecond", "ns"): d[r[ki][:70]].append(float(r[vi].replace(",", "")) / 1000)
    elif r[ui] in ("usecond", "us"): d[r[ki][:70]].append(float(r[vi].replace(",", "")))
for k, v in sorted(d.items(), key=lambda kv: -len(kv[1])):
    print(f"{k:72s} n={len(v):4d} median {statistics.median(v):8.2f} us  min {min(v):8.2f}  max {max(v):8.2f}")
PY
done
tar czf $OUT/s30d.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
