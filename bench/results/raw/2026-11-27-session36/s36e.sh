#!/usr/bin/env bash
# Session 36, call 5: early loads (Params::k_flags) — the CUDA suite, then GPU time per step
# (CUPTI) and wall per step (loop_forms) with KILN_EARLY_LOADS=1/0, processes alternated.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; rc=$?
tail -12 $OUT/suite.txt; echo "suite rc $rc, $(( $(date +%s) - t0 )) s"
build-gpu/tests/kiln_tests --gtest_filter='EarlyLoads*' 2>&1 | grep -E "OK|FAILED|Failure|PASSED" | head
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
export KILN_COMPILE=sync
for c in lstm1 gru1 seed64; do for e in 1 0; do
  KILN_EARLY_LOADS=$e CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv timeout 90 /tmp/probe $c 4000 N > /tmp/p.txt 2>&1
  echo "$c early $e: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c1-60) | $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 | sed -n 2p)"
done; done | tee $OUT/gpu-time.txt
for p in 1 2 3 4; do
  e=$(( p % 2 ))
  echo "== process $p early $e"
  KILN_EARLY_LOADS=$e timeout 120 /tmp/loop_forms 3000 2>&1 | grep -E "probe|eval every step|no eval  "
done | tee $OUT/forms.txt
echo "total $(( $(date +%s) - t0 )) s"
