#!/usr/bin/env bash
# Session 45 call 4: cuBLAS's set-up on a thread (kiln's kernels meanwhile). The new tests in a
# fresh process (poisoned allocations), the cuBLAS-related suites on CUDA, then cold_start.sh
# (its sample section: default, KILN_CUBLAS=wait, KILN_CUBLAS=0, PyTorch).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail -30 $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
export KILN_POISON_ALLOCATIONS=1
build-gpu/tests/kiln_tests --gtest_brief=1 --gtest_filter='CublasSetUpGpu.*' 2>&1 | tail -15
KILN_TEST_DEVICE=cuda build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='CublasSetUpGpu.*:NoCublasGpu.*:SmallMatmul*:*Reproducible*:CudaLibraries*:BackgroundBuilds*' 2>&1 | tail -15
unset KILN_POISON_ALLOCATIONS
echo "tests done $(( $(date +%s) - t0 )) s"
timeout $(( 560 - ($(date +%s) - t0) )) bench/cuda/cold_start.sh build-gpu > $OUT/cold-start.md 2>&1
echo "cold start rc $?"; tail -32 $OUT/cold-start.md
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
