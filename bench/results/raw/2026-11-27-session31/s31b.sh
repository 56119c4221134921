#!/usr/bin/env bash
# Session 31 call 2: own-grid merging: the merged-launch tests (LSTM at hidden 32, two sizes of
# the seed step), the seed loop merged and not alternated in one process (merge_probe), and
# ncu's duration of whole graphs (16 steps per replay) merged and not.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
export PATH=/usr/local/cuda/bin:$PATH
KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_filter='MergedLaunchGpu.*:Codegen.*Merge*:Codegen.OneStructure*' > /tmp/o/t.out 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" -A4 /tmp/o/t.out | head -30
g++ -std=c++20 -O2 -Iinclude -Ibuild-gpu/generated/include scripts/tmp/merge_probe.cpp -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/o/merge_probe || exit 1
for p in 1 2; do KILN_COMPILE=sync /tmp/o/merge_probe 4096 64 2>&1 | tee /tmp/o/probe$p.txt; echo "probe $p $(( $(date +%s) - t0 )) s"; done
KILN_COMPILE=sync /tmp/o/merge_probe 4096 32 16 2>&1 | tee /tmp/o/probe32.txt
for m in 1 0; do
  KILN_MERGE_LAUNCHES=$m KILN_COMPILE=sync timeout 120 ncu --graph-profiling graph --metrics gpu__time_duration.sum --csv /tmp/o/merge_probe 64 64 16 $m > /tmp/o/ncu-graph-m$m.csv 2>/tmp/o/ncu-graph-m$m.err
  echo "ncu merge=$m rc=$? $(( $(date +%s) - t0 )) s"; tail -4 /tmp/o/ncu-graph-m$m.csv | awk -F'","' '{print $5, $(NF-2), $(NF-1), $NF}'
done
tar czf $OUT/s31b.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
