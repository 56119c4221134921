#!/usr/bin/env bash
# Session 26 call 8: build; the cuBLAS warm-up (KILN_GEMM_WARMUP) on and off: the sample as users
# run it (first_step.sh, elapsed from the start of training) and patched (parameters evaluated
# in its constructor: set-up timed apart); profiles with the warm-up; exit checks.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
b=build-gpu
steps() { awk -F, 'NR>1 && ($1==1||$1==2||$1==5||$1==20) {printf "%s=%.3f ", $1, $4}' $1/loss.csv; }
one() { local mode=$1 dir=$2 label=$3; rm -rf /tmp/fs-out
  KILN_COMPILE=$mode KILN_CACHE_DIR=$dir $b/samples/kiln-rnn --device cuda --steps 20 --log-every 1 \
    --val-every 100000 --checkpoint-every 1000000 --out /tmp/fs-out > /tmp/fs.log 2>&1 || { echo "failed $label"; tail -5 /tmp/fs.log; }
  echo "$label: $(grep -o 'SETUP_MS [0-9.]*' /tmp/fs.log) steps $(steps /tmp/fs-out)"; }
series() {
  warm=/tmp/kiln-warm4; rm -rf $warm; one sync $warm "fill" > /dev/null
  for r in 1 2 3; do
    for w in 1 0; do
      d=$(mktemp -d); KILN_GEMM_WARMUP=$w one background $d "r$r warmup=$w cold background"; rm -rf $d
      KILN_GEMM_WARMUP=$w one sync $warm "r$r warmup=$w warm sync"
    done
  done
}
echo "== the sample as users run it"; series
cp -r samples /tmp/samples_orig; python3 scripts/tmp/setup_patch.py && cmake --build build-gpu --target kiln-rnn > /tmp/sb.log 2>&1 || { tail /tmp/sb.log; exit 1; }
echo "== patched: parameters evaluated in the constructor"; series
g++ -O2 -shared -fPIC -o /tmp/libsampler.so scripts/tmp/prof/sampler.cpp || exit 1
prof() { local mode=$1 dir=$2 label=$3; rm -rf /tmp/fs-out
  PROF_US=250 PROF_OUT=/tmp/prof-$label.txt LD_PRELOAD=/tmp/libsampler.so KILN_COMPILE=$mode KILN_CACHE_DIR=$dir $b/samples/kiln-rnn --device cuda --steps 1 --log-every 1 \
    --val-every 100000 --checkpoint-every 1000000 --out /tmp/fs-out > /tmp/fs.log 2>&1 || { echo "failed $label"; tail -5 /tmp/fs.log; }
  echo "$label: $(grep -o 'SETUP_MS [0-9.]*' /tmp/fs.log) step1 $(awk -F, 'NR==2 {print $4}' /tmp/fs-out/loss.csv)"
  { echo "=== $label step"; python3 scripts/tmp/prof/report.py /tmp/prof-$label.txt train_step; } >> $OUT/profiles.txt 2>&1; }
d=$(mktemp -d); prof background $d cold; rm -rf $d
prof sync /tmp/kiln-warm4 warm
grep -A40 "=== cold step" $OUT/profiles.txt | cut -c1-200
grep -A40 "=== warm step" $OUT/profiles.txt | cut -c1-200 | head -25
rm -rf samples && cp -r /tmp/samples_orig samples
for i in 1 2 3; do $b/tests/kiln_exit_compiling_check; echo "exit check rc=$?"; done
echo "total $(( $(date +%s) - t0 )) s"
