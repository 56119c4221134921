#!/usr/bin/env bash
set -uo pipefail
scripts/gpu-check build > /tmp/b.log 2>&1; echo build rc=$?
export KILN_CACHE_DIR=/tmp/kiln-c6
cd build-gpu
KILN_COMPILE=sync KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 ./tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='GpuVsCpu.ReplayedGraphsOfDependentKernelsMatchTheCpu:PlanCache.*' 2>&1 | tail -3
KILN_COMPILE=sync ./tests/kiln_exit_check; echo exit-check rc=$?
cd ..
scripts/tmp/first_step.sh build-gpu
# the fuzzer on CUDA in the default mode: every new program's kernels start on the stand-in
pids=()
for i in 0 1 2 3 4 5 6 7; do
  build-gpu/tests/kiln_fuzz --seed $((7000001 + i * 1000000)) --programs 1000000 --seconds 60 --device cuda > /tmp/fz$i.log 2>&1 &
  pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait $p || rc=1; done
echo "fuzz rc=$rc programs $(grep -ohP 'kiln_fuzz: \K[0-9]+(?= programs)' /tmp/fz*.log | awk '{s+=$1} END {print s}')"
grep -h -A3 MISMATCH /tmp/fz*.log | head -20
tail -2 /tmp/fz0.log
KILN_COMPILE=sync timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/kiln_tests \
  --gtest_filter='Standin.*' > /tmp/memcheck.log 2>&1; echo memcheck rc=$?
grep -E "ERROR SUMMARY|PASSED|FAILED" /tmp/memcheck.log | tail -5
