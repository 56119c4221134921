#!/usr/bin/env bash
# Session 44 call 2 (issue 19, the sample's first training step): kiln's own GEMM-tile and dot
# kernels for the sample's large f32 GEMMs (probe-only bounds: PROBE_TILE_LOG2=28,
# PROBE_DOT_MAX_K=4096; unset = today's rule) against its default (cuBLAS):
# (1) the GEMMs alone; (2) the first 5 training steps on an empty cache, 3 processes each;
# (3) the steady state on a warm cache; (4) session 32's hang (the sample's prediction after
# training, own GEMMs), under a preload that prints every thread's stack at 30 s.
set -uo pipefail
t0=$(date +%s)
cp scripts/tmp/small_matmul_probe.cpp engine/small_matmul.cpp
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
# the stand-in's dot chains without a type dispatch per k (this call's code): its bits
KILN_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='Standin*:*Standin*:*Catalogue*:GpuVsCpu.*Matmul*:*Gemm*' > $OUT/standin-tests.txt 2>&1
echo "stand-in tests rc $?"; tail -3 $OUT/standin-tests.txt
g++ -O2 -std=c++20 -I include -I build-gpu/generated/include -I bench -I . -I/usr/local/cuda/include \
  scripts/tmp/gemm_probe.cpp -o /tmp/gemm_probe -L build-gpu -lkiln -Wl,-rpath,$PWD/build-gpu \
  -L/usr/local/cuda/lib64 -lcublas -lcudart || exit 1
g++ -O1 -g -shared -fPIC -o /tmp/segv.so scripts/tmp/segv.cpp 2>/dev/null || echo "no preload"
own=(PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096)
{ echo "## GEMMs alone, default (cuBLAS above 2^24)"; KILN_COMPILE=sync /tmp/gemm_probe
  echo "## GEMMs alone, own kernels"; env "${own[@]}" KILN_COMPILE=sync /tmp/gemm_probe; } 2>&1 | tee $OUT/gemms.md
rnn() { build-gpu/samples/kiln-rnn --device cuda --checkpoint-every 1000000 --val-every 100000 "$@"; }
# a first process warms the loader's files (not counted)
d=$(mktemp -d); KILN_CACHE_DIR=$d rnn --steps 2 --out /tmp/r0 > /dev/null 2>&1; rm -rf $d /tmp/r0
for r in 1 2 3; do
  for m in default own; do
    e=(); [[ $m == own ]] && e=("${own[@]}")
    d=$(mktemp -d); env "${e[@]}" KILN_CACHE_DIR=$d rnn --steps 5 --log-every 1 --out /tmp/r1 > /dev/null 2>&1
    echo "first steps $m run $r rc $? kernels $(find $d -name '*.kce' | wc -l): $(tail -n +2 /tmp/r1/loss.csv | cut -d, -f1,4 | tr '\n' ' ')"
    rm -rf $d /tmp/r1
  done
done 2>&1 | tee $OUT/first-steps.txt
echo "t $(( $(date +%s) - t0 )) s"
for m in default own; do
  e=(); [[ $m == own ]] && e=("${own[@]}")
  d=/tmp/warm-$m; rm -rf $d; mkdir -p $d
  env "${e[@]}" KILN_CACHE_DIR=$d rnn --steps 50 --out /tmp/r2 > /dev/null 2>&1
  for r in 1 2; do
    env "${e[@]}" KILN_CACHE_DIR=$d rnn --steps 1000 --log-every 100 --out /tmp/r2 > /dev/null 2>&1
    awk -F, -v m=$m -v r=$r '$1==100{a=$4} $1==1000{b=$4} END{printf "steady %s run %d: %.3f ms a step (steps 100-1000)\n", m, r, (b-a)/900*1000}' /tmp/r2/loss.csv
  done
done 2>&1 | tee $OUT/steady.txt
# the first steps again on the warm disk caches: no stand-in, so what is left is set-up
for r in 1 2; do
  for m in default own; do
    e=(); [[ $m == own ]] && e=("${own[@]}")
    env "${e[@]}" KILN_CACHE_DIR=/tmp/warm-$m rnn --steps 5 --log-every 1 --out /tmp/r1 > /dev/null 2>&1
    echo "first steps, warm disk cache, $m run $r rc $?: $(tail -n +2 /tmp/r1/loss.csv | cut -d, -f1,4 | tr '\n' ' ')"
    rm -rf /tmp/r1
  done
done 2>&1 | tee -a $OUT/first-steps.txt
echo "t $(( $(date +%s) - t0 )) s"
# session 32's hang: the sample's 30 steps, then its validation, checkpoint and prediction
for r in 1 2 3; do
  d=$(mktemp -d)
  env "${own[@]}" KILN_CACHE_DIR=$d LD_PRELOAD=/tmp/segv.so timeout -s USR2 -k 5 40 \
    build-gpu/samples/kiln-rnn --device cuda --steps 30 --log-every 1 --out /tmp/r3 > /tmp/h.out 2> /tmp/h.err
  rc=$?; echo "=== own GEMMs full run $r rc $rc"; tail -2 /tmp/h.out; head -c 6000 /tmp/h.err
  rm -rf $d /tmp/r3
done 2>&1 | tee $OUT/hang.txt | grep "===\|wrote" 
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
