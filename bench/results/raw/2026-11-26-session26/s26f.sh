#!/usr/bin/env bash
# Session 26 call 6: build; where the sample's first training step goes (patched: parameters
# evaluated in its constructor), under a wall-clock sampler of the main thread.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
cp -r samples /tmp/samples_orig; python3 scripts/tmp/setup_patch.py && cmake --build build-gpu --target kiln-rnn > /tmp/sb.log 2>&1 || { tail /tmp/sb.log; exit 1; }
g++ -O2 -shared -fPIC -o /tmp/libsampler.so scripts/tmp/prof/sampler.cpp || exit 1
b=build-gpu
prof() { local mode=$1 dir=$2 label=$3; rm -rf /tmp/fs-out
  PROF_US=250 PROF_OUT=/tmp/prof-$label.txt LD_PRELOAD=/tmp/libsampler.so KILN_COMPILE=$mode KILN_CACHE_DIR=$dir $b/samples/kiln-rnn --device cuda --steps 1 --log-every 1 \
    --val-every 100000 --checkpoint-every 1000000 --out /tmp/fs-out > /tmp/fs.log 2>&1 || { echo "failed $label"; tail -5 /tmp/fs.log; }
  echo "$label: $(grep -o 'SETUP_MS [0-9.]*' /tmp/fs.log) step1 $(awk -F, 'NR==2 {print $4}' /tmp/fs-out/loss.csv)"
  { echo "=== $label step"; python3 scripts/tmp/prof/report.py /tmp/prof-$label.txt train_step; echo "=== $label setup"; python3 scripts/tmp/prof/report.py /tmp/prof-$label.txt Trainer::Trainer; } >> $OUT/profiles.txt 2>&1; }
warm=/tmp/kiln-warm3; rm -rf $warm
KILN_CACHE_DIR=$warm $b/samples/kiln-rnn --device cuda --steps 3 --out /tmp/fs-fill > /dev/null 2>&1
for r in 1 2; do
  d=$(mktemp -d); prof background $d cold$r; rm -rf $d
  prof sync $warm warm$r
done
grep -A45 "=== cold2 step" $OUT/profiles.txt | cut -c1-220
echo "total $(( $(date +%s) - t0 )) s"
