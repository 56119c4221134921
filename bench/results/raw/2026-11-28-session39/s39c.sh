#!/usr/bin/env bash
# Session 39 call 4: does glibc's heap trimming (brk up and down, fresh pages faulted in) cost the
# loops without eval on the device machine (gVisor: syscalls and page faults are expensive)?
# The probe alternates default malloc settings with no trimming and a large top pad; then the
# sampler over the loop only (its first 1.5 s left out), gathered into one file.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > /dev/null 2>&1 || { echo build failed; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -O2 -shared -fPIC tools/host-probe/sampler.cpp -o /tmp/libsampler.so || exit 1
NOTRIM="glibc.malloc.trim_threshold=4294967295:glibc.malloc.top_pad=268435456:glibc.malloc.mmap_threshold=33554432"
for round in 1 2 3; do for c in gru1 seed64 lstm1; do for m in default notrim; do
  if [[ $m == notrim ]]; then env GLIBC_TUNABLES=$NOTRIM timeout 30 /tmp/probe $c 200000 N > /tmp/p.txt 2>&1
  else timeout 30 /tmp/probe $c 200000 N > /tmp/p.txt 2>&1; fi
  echo "round $round $c $m: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c30-90)"
done; done; done | tee $OUT/malloc-ab.txt
for c in gru1 lstm1; do
  timeout 40 env LD_PRELOAD=/tmp/libsampler.so SAMPLER_OUT=/tmp/prof.txt SAMPLER_DELAY_MS=1500 /tmp/probe $c 600000 N > /tmp/p.txt 2>&1
  { echo "=== $c"; cat /tmp/p.txt; head -70 /tmp/prof.txt; } >> $OUT/profiles.txt
done
rm -f $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
