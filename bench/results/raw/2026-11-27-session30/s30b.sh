#!/usr/bin/env bash
# Session 30 call 2: merged launches (KILN_MERGE_LAUNCHES). Build; the merged-launch tests and
# the suites that run batches, on CUDA with poisoned allocations; then rnn_gpu's rows for the
# seed loop (d=64), LSTM b1 and GRU b1 with merging on and off, alternated, two rounds.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
tail -3 /tmp/o/build.out
KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_filter='MergedLaunch*:Codegen.Merged*' > /tmp/o/merged_tests.out 2>&1
echo "merged tests rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|error" /tmp/o/merged_tests.out | head -20
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync timeout 220 build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='PlanCache*:AdaptiveLoopFlush*:Compile*:Lazy*:GpuVsCpu*:Standin*:Reproducible*:SmallMatmul*:FusedVsEager*' > /tmp/o/suites.out 2>&1
echo "suites rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" /tmp/o/suites.out | head -20
for r in 1 2; do
  for c in "seed d=64" "LSTM batch 1" "GRU batch 1"; do
    for m in 1 0; do
      (( $(date +%s) - t0 > 540 )) && break 3
      f=/tmp/o/r$r-m$m-${c// /_}.md
      KILN_MERGE_LAUNCHES=$m KILN_COMPILE=sync build-gpu/bench/rnn_gpu 2000 3 "$c" > "$f" 2>&1
      echo "r$r merge=$m $c rc=$? $(( $(date +%s) - t0 )) s"
      grep -E "^\| .* \| (kiln GPU lazy, CUDA graphs|kiln GPU lazy, CUDA graphs, no eval in the loop|kiln GPU, the step compiled \(kiln::compile\)) \| [0-9]+ \| [0-9.]+ \| [0-9.]+-[0-9.]+ \|" "$f" | cut -d'|' -f2-6
      grep -E "\| NO \|" "$f"
    done
  done
done
tar czf $OUT/s30b.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
