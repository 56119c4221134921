#!/usr/bin/env bash
# Prepared in session 34, not run: is the H100 host's process-to-process speed (the seed loop
# without eval at 1.97 us in one process and 2.39 in the next, host-bound; 2026-11-27-h100-session34.md)
# the scheduler moving kiln's threads between cores? loop_forms (seed and GRU) in processes
# unpinned and confined to a few cores (taskset; the launch thread and NVRTC's threads inherit the
# mask), alternated, two processes each. Then row dots (KILN_ROW_DOTS, never run on a GPU yet):
# their tests and the seed loop's rows against the default; ncu on both merged kernels. Then
# `scripts/gpu-check suite` (about 3 minutes after the build, in shards) in the next call on the
# warm machine: the suite has not run on the last commits of session 34.
set -uo pipefail
t0=$(date +%s)
lscpu | grep -E "^(Model name|Socket|Core|Thread|NUMA|L2|L3)" > $OUT/lscpu.txt
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
KILN_COMPILE=sync /tmp/loop_forms 300 seed > /dev/null 2>&1
for round in 1 2; do
  for mask in all 4-7 4,5; do
    echo "== round $round, cores $mask"
    if [[ $mask == all ]]; then timeout 60 /tmp/loop_forms 2000 seed; timeout 60 /tmp/loop_forms 2000 gru
    else timeout 60 taskset -c $mask /tmp/loop_forms 2000 seed; timeout 60 taskset -c $mask /tmp/loop_forms 2000 gru; fi
  done
done 2>&1 | grep -E "==|eval every step|no eval  " | tee $OUT/pinning.txt
# Row dots (experimental, KILN_ROW_DOTS=1): their GPU tests,
# then the seed rows of rnn_gpu with merged row dots against the default, alternated in 4
# processes (the no-eval row is issue 20's seed target).
KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests \
  --gtest_filter='MergedLaunchGpu.*:Codegen.RowDots*:Standin.*' --gtest_brief=1 2>&1 | tail -4
for r in 1 2; do
  for m in default rowdots; do
    if [[ $m == rowdots ]]; then env=(KILN_ROW_DOTS=1 KILN_MERGE_LAUNCHES=1); else env=(); fi
    env "${env[@]}" timeout 60 build-gpu/bench/rnn_gpu 3000 3 "seed d=64" > $OUT/rnn-$m-$r.md 2>&1
    echo "round $r $m rc=$?"
    grep -E "CUDA graphs \||no eval in the loop \||^target \(issue 20\): seed|ERROR" $OUT/rnn-$m-$r.md | cut -d'|' -f2-6,10-13
  done
done
# Where a merged seed step's ~2 us go on the GPU (16 blocks of 16 x 16 tiles, a cluster of 16,
# W and x reloaded every step): ncu's detail on one launch of the 16-step merged kernel.
export PATH=/usr/local/cuda/bin:$PATH
KILN_COMPILE=sync timeout 120 ncu --set detailed -k regex:_x16_ --launch-count 1 \
  build-gpu/tests/kiln_tests --gtest_filter='MergedLaunchGpu.SeedLoopStepsMerged*' > $OUT/ncu-seed-x16.txt 2>&1
grep -E "Duration|Elapsed Cycles|Executed Ipc|Registers|Stall|Warp Cycles|L2 Hit|Achieved Occ" \
  $OUT/ncu-seed-x16.txt | head -30
KILN_COMPILE=sync timeout 120 ncu --set detailed -k regex:_x16_ --launch-count 1 \
  build-gpu/tests/kiln_tests --gtest_filter='MergedLaunchGpu.SeedLoopAsRowDots*' > $OUT/ncu-rowdots-x16.txt 2>&1
grep -E "Duration|Elapsed Cycles|Executed Ipc|Registers|Warp Cycles|L2 Hit" $OUT/ncu-rowdots-x16.txt | head -12
echo "total $(( $(date +%s) - t0 )) s"
