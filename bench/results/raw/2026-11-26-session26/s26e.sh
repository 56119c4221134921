#!/usr/bin/env bash
# Session 26 call 5: build; the sample (patched: parameters evaluated in its constructor) under a
# wall-clock sampler of the main thread, --steps 1, cold background and warm sync: where the
# first training step goes; then the mutation check.
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
  python3 scripts/tmp/prof/report.py /tmp/prof-$label.txt train_step > $OUT/prof-$label.txt 2>&1
  python3 scripts/tmp/prof/report.py /tmp/prof-$label.txt Trainer::Trainer > $OUT/prof-$label-setup.txt 2>&1; }
warm=/tmp/kiln-warm3; rm -rf $warm
KILN_CACHE_DIR=$warm $b/samples/kiln-rnn --device cuda --steps 3 --out /tmp/fs-fill > /dev/null 2>&1
for r in 1 2; do
  d=$(mktemp -d); prof background $d cold$r; rm -rf $d
  prof sync $warm warm$r
done
head -50 $OUT/prof-cold2.txt | cut -c1-200
echo "profiles $(( $(date +%s) - t0 )) s"
rm -rf samples && cp -r /tmp/samples_orig samples
scripts/tmp/mutate3.sh
echo "total $(( $(date +%s) - t0 )) s"
