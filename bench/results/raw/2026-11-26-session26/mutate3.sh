#!/usr/bin/env bash
# Shows that the reduction and segmented cases of tests/cuda/standin_gpu_test.cpp can fail: a
# copy of the tree whose interpreter divides a mean by R + 1, drops a column's last partial sum,
# and strides a segment's grid loop by all blocks up to its end (skipping elements), built and run.
set -uo pipefail
src=$PWD
rm -rf /tmp/mut && mkdir -p /tmp/mut
tar -C "$src" --exclude=./build --exclude=./build-gpu --exclude=./build-asan -cf - . | tar -C /tmp/mut -xf -
cd /tmp/mut
sed -i 's|if (r.op == op_mean) x = x / (double)R;|if (r.op == op_mean) x = x / (double)(R + 1);|; s|for (int y = 1; y < by; ++y)|for (int y = 1; y < by - 1; ++y)|' codegen/device/standin_reduce.cuh
sed -i 's|blockIdx.x - begin, end - begin|blockIdx.x - begin, end|' codegen/device/standin.cu
echo "mutations: $(grep -c 'R + 1)\|y < by - 1' codegen/device/standin_reduce.cuh) + $(grep -c 'blockIdx.x - begin, end)' codegen/device/standin.cu)"
cmake -S . -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT=$src/.deps/llvm >/dev/null 2>&1 || cmake -S . -B b -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build b -j16 --target kiln_tests >/tmp/mut-build.log 2>&1 || { tail -20 /tmp/mut-build.log; exit 1; }
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 b/tests/kiln_tests --gtest_filter='Standin.Reductions*:Standin.Sums*:Standin.Segmented*:Standin.Integer*' 2>&1 | grep -E "elements differ|^\[  (FAILED|PASSED)" | head -30
