#!/usr/bin/env bash
# Session 37 call 4 (probe, not committed code: PROBE_DOT_BX in choose_dot, /tmp/probe-dot-bx.diff):
# dot kernels with 4 or 2 elements a block instead of 8 (64 / 128 blocks for a cell at hidden
# 256 instead of 32; each element's K split over 64 / 128 threads instead of 32). First the
# GPU-vs-CPU and stand-in tests with each, then the cells' GPU time a step (CUPTI, no eval).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail -30 $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
export KILN_CACHE_DIR=/tmp/kiln-probe-cache
for bx in 4 2; do
  PROBE_DOT_BX=$bx KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync timeout 120 \
    build-gpu/tests/kiln_tests --gtest_filter='GpuVsCpu.*:Standin*:-GpuVsCpu.OutOfMemory*' --gtest_brief=1 > $OUT/tests-bx$bx.log 2>&1
  echo "bx $bx tests rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/tests-bx$bx.log | tr '\n' ' ')"
  grep -E "^\[  FAILED" $OUT/tests-bx$bx.log | head -5
done
echo "tests $(( $(date +%s) - t0 )) s"
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
for round in 1 2; do
for c in lstm1h128 lstm1 lstm1h512 gru1h128 gru1 gru1h512; do for bx in 8 4 2; do
  PROBE_DOT_BX=$bx KILN_COMPILE=sync CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv timeout 60 /tmp/probe $c 4000 N > /tmp/p.txt 2>&1
  echo "round $round $c bx $bx: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c31-50) | $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 | sed -n 2p)"
done; done; done | tee $OUT/gpu-time.txt
echo "total $(( $(date +%s) - t0 )) s"
