#!/usr/bin/env bash
# Session 30 call 7: merged seed steps on one block (gemm tile 64, __syncthreads between steps)
# against a cluster of 4 (gemm tile 32) and against separate launches. Scratch
# KILN_SCRATCH_REPEAT_SMS=1 makes choose_repeat take the variant of a 1-SM GPU. rnn_gpu's seed
# rows (KILN_COMPILE=sync), alternated, two rounds; the merged-launch tests and ncu's durations
# with the scratch switch on.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
export PATH=/usr/local/cuda/bin:$PATH
KILN_SCRATCH_REPEAT_SMS=1 KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_filter='MergedLaunchGpu.*' > /tmp/o/t1.out 2>&1
echo "tests (one block) rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" -A3 /tmp/o/t1.out | head
KILN_SCRATCH_REPEAT_SMS=1 timeout 100 ncu --metrics gpu__time_duration.sum --csv build-gpu/tests/kiln_tests --gtest_filter='MergedLaunchGpu.Seed*' > /tmp/o/ncu1.csv 2>/tmp/o/ncu1.err
grep -E "_x16_" /tmp/o/ncu1.csv | head -3
for r in 1 2; do
  for v in off one four; do
    (( $(date +%s) - t0 > 330 )) && break 2
    case $v in off) env="KILN_MERGE_LAUNCHES=0";; one) env="KILN_MERGE_LAUNCHES=1 KILN_SCRATCH_REPEAT_SMS=1";; four) env="KILN_MERGE_LAUNCHES=1";; esac
    f=/tmp/o/r$r-$v.md
    env $env KILN_COMPILE=sync build-gpu/bench/rnn_gpu 2000 3 "seed d=64" > "$f" 2>&1
    echo "r$r $v rc=$? $(( $(date +%s) - t0 )) s"
    grep -E "^\| .* \| (kiln GPU lazy, CUDA graphs|kiln GPU lazy, CUDA graphs, no eval in the loop) \| [0-9]+ \| [0-9.]+ \| [0-9.]+-[0-9.]+ \|" "$f" | cut -d'|' -f2-6
    grep -E "\| NO \|" "$f"
  done
done
tar czf $OUT/s30g.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
