#!/usr/bin/env bash
# Session 39 call 1: the CUDA suite at HEAD (views through templates, 6591c19, and 0e62c82 never
# ran on the H100), then where the host's time goes in the GRU's and LSTM's loops without eval
# (tools/host-probe/sampler.cpp preloaded into the probe, 200,000 steps each, alternating).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; rc=$?
tail -7 $OUT/suite.txt; echo "suite rc $rc, $(( $(date +%s) - t0 )) s"
grep -hE "^\[  FAILED|Failure" $OUT/tests-cuda*.log 2>/dev/null | head -10
grep -hE "LoopTemplate" $OUT/tests-cuda*.log 2>/dev/null | grep -E "OK|FAILED" | head -8
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -O2 -shared -fPIC tools/host-probe/sampler.cpp -o /tmp/libsampler.so || exit 1
for round in 1 2; do for c in lstm1 gru1 seed64; do
  left=$(( 580 - ($(date +%s) - t0) )); (( left > 20 )) || break 2
  LD_PRELOAD=/tmp/libsampler.so SAMPLER_OUT=$OUT/prof-$c-$round.txt timeout 20 /tmp/probe $c 200000 N > $OUT/probe-$c-$round.txt 2>&1
  echo "round $round $c: $(grep -E 'us/step' $OUT/probe-$c-$round.txt | head -1 | cut -c1-90)"
done; done
echo "total $(( $(date +%s) - t0 )) s"
