#!/usr/bin/env bash
# Session 39 call 2: where the host's time goes in the loops without eval on the H100
# (tools/host-probe/sampler.cpp preloaded into the probe, 200,000 steps each, two rounds),
# profiles gathered into one file (the device returns only a few files).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > /dev/null 2>&1 || { echo build failed; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -O2 -shared -fPIC tools/host-probe/sampler.cpp -o /tmp/libsampler.so || exit 1
for round in 1 2; do for c in lstm1 gru1 seed64; do
  timeout 30 env LD_PRELOAD=/tmp/libsampler.so SAMPLER_OUT=/tmp/prof.txt /tmp/probe $c 200000 N > /tmp/p.txt 2>&1
  { echo "=== round $round $c"; cat /tmp/p.txt; head -60 /tmp/prof.txt; } >> $OUT/profiles.txt
  echo "round $round $c: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c1-90)"
done; done
rm -f $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
