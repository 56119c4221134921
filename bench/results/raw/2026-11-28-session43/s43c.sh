#!/usr/bin/env bash
# Session 43 call 3: why the GRU cell's op calls take ~2x the LSTM's host time on the GPU (eval
# every step: record 3.20 vs 1.49 us, 21 vs 18 nodes) while on the CPU backend of the same host
# they take less (2.22 vs 2.92). The probe with stats (templates, merges), alternated, then the
# sampler over each cell's eval-every-step loop and its no-eval loop.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > /dev/null 2>&1 || { echo build failed; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
llvm_inc=.deps/llvm/include; d=$(ls -d /usr/lib/llvm-*/include 2>/dev/null | sort -V | tail -1); [[ -n $d ]] && llvm_inc=$d
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I$llvm_inc tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -O2 -shared -fPIC tools/host-probe/sampler.cpp -o /tmp/libsampler.so || exit 1
for round in 1 2; do for c in gru1 lstm1; do
  PROBE_STATS=1 timeout 40 /tmp/probe $c 20000 EN > /tmp/p.txt 2>&1
  { echo "=== round $round $c"; grep -v "^===" /tmp/p.txt; } >> $OUT/probe-stats.txt
done; done
grep -E "===|us/step|recording" $OUT/probe-stats.txt
for c in gru1 lstm1; do for m in E N; do
  timeout 60 env LD_PRELOAD=/tmp/libsampler.so SAMPLER_OUT=/tmp/prof.txt SAMPLER_DELAY_MS=1500 /tmp/probe $c 300000 $m > /tmp/p.txt 2>&1
  { echo "=== $c $m"; grep -v "^===" /tmp/p.txt; head -60 /tmp/prof.txt; } >> $OUT/profiles.txt
done; done
grep -E "===|us/step" $OUT/profiles.txt
rm -f $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
