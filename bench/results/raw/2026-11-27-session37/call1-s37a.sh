#!/usr/bin/env bash
# Prepared in session 36, not run (the device time ran out): first apply
# bench/results/raw/2026-11-27-session36/dot-clusters-long-dots-only.diff (dot kernels take
# clusters for long dots only, choose_dot) and commit; then this call runs the CUDA suite and
# the LSTM/GRU cells' GPU time per step (CUPTI, no eval and an eval every step). Expected from
# calls 10-11: LSTM ~3.85, GRU ~3.33 us a step without eval (4.35 and 4.21 on clusters).
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
