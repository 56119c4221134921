#!/usr/bin/env bash
# Session 28 call 3: the two graph-counting tests with KILN_COMPILE=sync (as the suite runs
# them); warm-cache ncu of the LSTM and GRU cell kernels at batch 1, stall samples per SASS
# instruction; the kernels' SASS.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
export KILN_CACHE_DIR=/tmp/kc28
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='GpuVsCpu.TrainingStepReplaysEveryBatchAsAGraph:GpuVsCpu.ReplayedGraphsOfDependentKernelsMatchTheCpu:GpuVsCpu.FusedNormalizations*' > /tmp/o/tests-graphs.log 2>&1
echo "tests rc=$? $(tail -3 /tmp/o/tests-graphs.log | tr '\n' ' ')"
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_probe || exit 1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
$NCU --help | grep -i -A2 "sampling-interval" | head -5
for c in gru1 lstm1; do
  KILN_COMPILE=sync /tmp/loop_probe $c 3000 E > /dev/null 2>&1 # fill the cache
  timeout 150 $NCU --launch-skip 2500 --launch-count 1 -k regex:kiln_ \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
    --section Occupancy --warp-sampling-interval 0 --import-source no \
    --cache-control none --clock-control none \
    -o /tmp/o/ncu-warm-$c /tmp/loop_probe $c 3000 E > /tmp/o/ncu-$c.log 2>&1; echo "ncu $c rc=$?"
  tail -3 /tmp/o/ncu-$c.log
  $NCU --import /tmp/o/ncu-warm-$c.ncu-rep --page details --print-details all 2>&1 | grep -v "^    ---\|^$" | cut -c1-150 | \
    grep -E "Duration|Elapsed Cycles|Registers|Block Size|Grid Size|Cluster Size|Achieved Occupancy|Compute \(SM\) Th|Warp Cycles Per Issued|One or More|kiln_" | sort -u | head -20
  $NCU --import /tmp/o/ncu-warm-$c.ncu-rep --page source --csv --print-source sass 2>/dev/null > /tmp/o/sass-warm-$c.csv
  python3 scripts/tmp/sass_top.py /tmp/o/sass-warm-$c.csv 45
done
ls $KILN_CACHE_DIR | head; find $KILN_CACHE_DIR -name "*matmul*" | head
tar czf $OUT/s28c.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
