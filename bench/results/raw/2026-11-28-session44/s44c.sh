#!/usr/bin/env bash
# Session 44 call 3: (1) the exit guard (a thread_local of the main thread stops the background
# compiles before any exit handler): its test on the device, and the sample's full run with own
# GEMMs (call 2: a SIGSEGV inside NVRTC on the compile thread in 1 of 3 runs) many times, each
# failure's every stack kept; (2) issue 19's first steps: default (cuBLAS above 2^24) against
# kiln's own GEMMs (probe bounds PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096), empty cache and warm
# disk cache, and the steady state. The stand-in's dot chains are without a type dispatch per k.
set -uo pipefail
t0=$(date +%s)
cp scripts/tmp/small_matmul_probe.cpp engine/small_matmul.cpp
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -O1 -g -shared -fPIC -o /tmp/segv.so scripts/tmp/segv.cpp 2>/dev/null || echo "no preload"
KILN_DEVICE=cuda build-gpu/tests/kiln_tests --gtest_brief=1 --gtest_filter='BackgroundBuilds*' 2>&1 | tail -2
own=(PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096)
RNN=(build-gpu/samples/kiln-rnn --device cuda --checkpoint-every 1000000 --val-every 100000)
hunt=$OUT/hunt.txt; : > $hunt; fails=0; runs=0; t1=$(date +%s)
while (( $(date +%s) - t1 < 100 )); do
  for m in own own default-p0; do
    e=("${own[@]}"); [[ $m == default-p0 ]] && e=(KILN_COMPILE_PROCESSES=0)
    d=$(mktemp -d)
    env "${e[@]}" KILN_CACHE_DIR=$d LD_PRELOAD=/tmp/segv.so timeout -s USR2 -k 5 40 \
      build-gpu/samples/kiln-rnn --device cuda --steps 30 --log-every 1 --out /tmp/r3 > /tmp/h.out 2> /tmp/h.err
    rc=$?; runs=$((runs+1))
    if (( rc != 0 )) || grep -q "^--- " /tmp/h.err; then
      fails=$((fails+1)); { echo "=== run $runs ($m) rc $rc"; tail -2 /tmp/h.out; cat /tmp/h.err; } >> $hunt
    fi
    rm -rf $d /tmp/r3
  done
done
echo "full runs: $fails of $runs failed ($(( $(date +%s) - t1 )) s)"
head -c 20000 $hunt > $OUT/hunt-head.txt; rm -f $hunt
d=$(mktemp -d); KILN_CACHE_DIR=$d "${RNN[@]}" --steps 2 --out /tmp/r0 > /dev/null 2>&1; rm -rf $d /tmp/r0
for r in 1 2 3; do
  for m in default own; do
    e=(X=1); [[ $m == own ]] && e=("${own[@]}")
    d=$(mktemp -d); env "${e[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 5 --log-every 1 --out /tmp/r1 > /dev/null 2>&1
    echo "first steps $m run $r rc $? kernels $(find $d -name '*.kce' | wc -l): $(tail -n +2 /tmp/r1/loss.csv | cut -d, -f1,4 | tr '\n' ' ')"
    rm -rf $d /tmp/r1
  done
done 2>&1 | tee $OUT/first-steps.txt
for m in default own; do
  e=(X=1); [[ $m == own ]] && e=("${own[@]}")
  d=/tmp/warm-$m; rm -rf $d; mkdir -p $d
  env "${e[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 50 --out /tmp/r2 > /dev/null 2>&1
  for r in 1 2; do
    env "${e[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 1000 --log-every 100 --out /tmp/r2 > /dev/null 2>&1
    awk -F, -v m=$m -v r=$r '$1==100{a=$4} $1==1000{b=$4} END{printf "steady %s run %d: %.3f ms a step (steps 100-1000)\n", m, r, (b-a)/900*1000}' /tmp/r2/loss.csv
  done
done 2>&1 | tee $OUT/steady.txt
for r in 1 2; do
  for m in default own; do
    e=(X=1); [[ $m == own ]] && e=("${own[@]}")
    env "${e[@]}" KILN_CACHE_DIR=/tmp/warm-$m "${RNN[@]}" --steps 5 --log-every 1 --out /tmp/r1 > /dev/null 2>&1
    echo "first steps, warm disk cache, $m run $r rc $?: $(tail -n +2 /tmp/r1/loss.csv | cut -d, -f1,4 | tr '\n' ' ')"
    rm -rf /tmp/r1
  done
done 2>&1 | tee -a $OUT/first-steps.txt
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
