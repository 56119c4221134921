#!/usr/bin/env bash
# Session 45 call 6: the cuBLAS set-up tests at fa65fac + the fixture's fix, under the suite's
# environment (KILN_COMPILE=sync, poisoned allocations) in fresh processes, twice, after the
# cuBLAS tests of the rest of the suite in one process, then under compute-sanitizer memcheck.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail -30 $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
export KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync
for r in 1 2; do build-gpu/tests/kiln_tests --gtest_brief=1 --gtest_filter='CublasSetUpGpu.*' 2>&1 | tail -4; done
build-gpu/tests/kiln_tests --gtest_brief=1 --gtest_filter='NoCublasGpu.*:SmallMatmul*:CublasSetUpGpu.*' 2>&1 | tail -4
echo "tests $(( $(date +%s) - t0 )) s"
timeout 300 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/kiln_tests \
  --gtest_brief=1 --gtest_filter='CublasSetUpGpu.*-*Exit*' > $OUT/memcheck.txt 2>&1; echo "memcheck rc $?"
tail -6 $OUT/memcheck.txt
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
