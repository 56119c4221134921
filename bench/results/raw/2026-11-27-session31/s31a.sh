#!/usr/bin/env bash
# Session 30 call 9: merged launches only where the kernel's own grid is one cluster (the seed
# step at d=64: its own 16 blocks, a non-portable cluster of 16; the same variant merged or
# not). The merged-launch tests; ncu's duration of the seed's 16-step merged kernel; rnn_gpu's
# seed rows with merging on and off, alternated, two rounds.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
export PATH=/usr/local/cuda/bin:$PATH
KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_filter='MergedLaunchGpu.*:Codegen.*Merge*' > /tmp/o/t.out 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" -A4 /tmp/o/t.out | head -20
timeout 60 ncu --metrics gpu__time_duration.sum --csv build-gpu/tests/kiln_tests --gtest_filter='MergedLaunchGpu.Seed*' > /tmp/o/ncu.csv 2>/tmp/o/ncu.err
grep -E "_x16_|etc_f32_sm90" /tmp/o/ncu.csv | awk -F'","' '{print $5, $NF}' | sort | uniq -c | head -6
for r in 1 2; do
  for m in 1 0; do
    (( $(date +%s) - t0 > 230 )) && break 2
    f=/tmp/o/r$r-m$m.md
    KILN_MERGE_LAUNCHES=$m KILN_COMPILE=sync timeout 40 build-gpu/bench/rnn_gpu 2000 3 "seed d=64" > "$f" 2>&1
    echo "r$r merge=$m rc=$? $(( $(date +%s) - t0 )) s"
    grep -E "^\| .* \| (kiln GPU lazy, CUDA graphs|kiln GPU lazy, CUDA graphs, no eval in the loop) \| [0-9]+ \| [0-9.]+ \| [0-9.]+-[0-9.]+ \|" "$f" | cut -d'|' -f2-6
    grep -E "\| NO \|" "$f"
  done
done
tar czf $OUT/s30i.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
