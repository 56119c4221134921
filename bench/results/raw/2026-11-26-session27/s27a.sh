#!/usr/bin/env bash
# Session 27 call 1: build; RecycledBlocks/PlanCache tests on CUDA (poisoned); where a loop
# without eval spends its host time on the H100's host (probe + wall-clock sampler).
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='RecycledBlocks*:PlanCache*:AdaptiveLoopFlush*:Standin*' 2>&1 | tail -4
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_probe || exit 1
g++ -O2 -shared -fPIC -o /tmp/libsampler.so scripts/tmp/prof/sampler.cpp || exit 1
export KILN_CACHE_DIR=/tmp/kc27
for c in seed64 lstm1 gru1; do /tmp/loop_probe $c 20000 ENEN 2>/dev/null | grep -v "step us"; done
for c in seed64 lstm1; do
  PROF_US=100 PROF_OUT=/tmp/prof-$c.txt LD_PRELOAD=/tmp/libsampler.so /tmp/loop_probe $c 60000 N 2>/dev/null | grep us/step
  python3 scripts/tmp/prof/report.py /tmp/prof-$c.txt record > $OUT/prof-$c.txt 2>&1
  echo "== $c"; grep -A70 "== inclusive" $OUT/prof-$c.txt | cut -c1-200 | head -75
  grep -A40 "== self" $OUT/prof-$c.txt | cut -c1-160 | head -40
done
echo "total $(( $(date +%s) - t0 )) s"
