#!/usr/bin/env bash
# Session 36, call 12: dot kernels take clusters for long dots only (choose_dot): the CUDA
# suite, and the LSTM/GRU cells' GPU time per step (CUPTI, no eval and an eval every step).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; rc=$?
tail -7 $OUT/suite.txt; echo "suite rc $rc, $(( $(date +%s) - t0 )) s"
grep -hE "^\[  FAILED|Failure" $OUT/tests-cuda*.log 2>/dev/null | head -10
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
for c in lstm1 gru1; do for m in N E; do
  KILN_COMPILE=sync CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv timeout 90 /tmp/probe $c 4000 $m > /tmp/p.txt 2>&1
  echo "$c $m: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c1-60) | $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 | sed -n 2p)"
done; done | tee $OUT/gpu-time.txt
echo "total $(( $(date +%s) - t0 )) s"
