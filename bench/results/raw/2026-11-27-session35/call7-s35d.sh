#!/usr/bin/env bash
# Session 35 call 7: partial tiles parked by explicit 16-byte stores (swizzled), sums in
# registers: the matmul GPU tests, then the kernel-trace and rnn_gpu A/B against 5223a2d.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/old && tar -xf scripts/tmp/old.tar -C /tmp/old
llvm=$PWD/.deps/llvm
(cd /tmp/old && cmake -S . -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT=$llvm > /tmp/old-conf.log 2>&1 &&
  cmake --build build-old -j8 --target rnn_gpu > /tmp/old-build.log 2>&1; echo "old build rc=$? $(( $(date +%s) - t0 )) s") &
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
KILN_CACHE_DIR=/tmp/kc7-tests KILN_COMPILE=sync KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests \
  --gtest_filter='SmallMatmul*:GpuVsCpu.*:Standin.*:MergedLaunchGpu.*:Large.*Matmul*:Ops/Matmul*:MatmulMisc.*:Reproducible*' --gtest_brief=1 2>&1 | tail -5
echo "tests $(( $(date +%s) - t0 )) s"
wait
sed -i 's/kc5-/kc7-/g' scripts/tmp/s35c.sh
SKIP_SUITE=1 OLD_JOBS=16 scripts/tmp/s35c.sh 2>&1 | grep -v "old build"
