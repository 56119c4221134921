#!/usr/bin/env bash
# Shows that tests/cuda/standin_gpu_test.cpp can fail: a copy of the tree whose interpreter
# rounds two things differently (sigmoid through __expf; a GEMM tile's K groups added in reverse
# order), built and run.
set -uo pipefail
src=$PWD
rm -rf /tmp/mut && mkdir -p /tmp/mut
tar -C "$src" --exclude=./build --exclude=./build-gpu --exclude=./build-asan -cf - . | tar -C /tmp/mut -xf -
cd /tmp/mut
sed -i 's|return half ? k_div_h(1.0f, 1.0f + k_exp_h(-a)) : 1.0f / (1.0f + expf(-a));|return half ? k_div_h(1.0f, 1.0f + k_exp_h(-a)) : 1.0f / (1.0f + __expf(-a));|' codegen/device/standin.cu
sed -i 's|      for (int g = 0; g < G; ++g) {|      for (int g = G - 1; g >= 0; --g) {|; s|        s = g == 0 ? part : s + part;|        s = g == G - 1 ? part : s + part;|' codegen/device/standin.cu
grep -c "__expf(-a)\|g = G - 1" codegen/device/standin.cu
cmake -S . -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT=$src/.deps/llvm >/dev/null 2>&1 || cmake -S . -B b -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build b -j16 --target kiln_tests >/tmp/mut-build.log 2>&1 || { tail -20 /tmp/mut-build.log; exit 1; }
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 b/tests/kiln_tests --gtest_filter='Standin.Unary*:Standin.Matrices*' 2>&1 | grep -E "elements differ|^\[  (FAILED|PASSED)" | head -20
