#!/usr/bin/env bash
# Shows that the reduction cases of tests/cuda/standin_gpu_test.cpp can fail: a copy of the tree
# whose interpreter folds a column's partial sums in reverse order of ty, and adds f16/bf16
# vector elements straight into the double accumulator (no float partial), built and run.
set -uo pipefail
src=$PWD
rm -rf /tmp/mut && mkdir -p /tmp/mut
tar -C "$src" --exclude=./build --exclude=./build-gpu --exclude=./build-asan -cf - . | tar -C /tmp/mut -xf -
cd /tmp/mut
sed -i 's|for (int y = 1; y < by; ++y)|for (int y = by - 1; y >= 1; --y)|; s|      if (pacc \&\& in.c)|      if (false)|' codegen/device/standin_reduce.cuh
grep -c "y = by - 1\|if (false)" codegen/device/standin_reduce.cuh
cmake -S . -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT=$src/.deps/llvm >/dev/null 2>&1 || cmake -S . -B b -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build b -j16 --target kiln_tests >/tmp/mut-build.log 2>&1 || { tail -20 /tmp/mut-build.log; exit 1; }
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 b/tests/kiln_tests --gtest_filter='Standin.Reductions*:Standin.Sums*' 2>&1 | grep -E "elements differ|^\[  (FAILED|PASSED)|Trace|standin_gpu_test.cpp:[0-9]+: [a-z0-9]+$" | head -40
