#!/usr/bin/env bash
# Session 45 call 2 (prepared in session 44): where the sample's first training step goes when
# it pays neither cuBLAS's set-up nor a compile (KILN_CUBLAS=0, warm disk cache: 37-39 ms in
# session 44, call 5). The host sampler (main thread, a sample every 50 us) over a whole
# 1-step run, 3 processes; each profile's top functions kept.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
g++ -O2 -shared -fPIC tools/host-probe/sampler.cpp -o /tmp/libsampler.so -ldl || exit 1
RNN=(build-gpu/samples/kiln-rnn --device cuda --no-cublas --checkpoint-every 1000000 --val-every 100000)
d=/tmp/warm-nocublas; rm -rf $d; mkdir -p $d
KILN_CACHE_DIR=$d "${RNN[@]}" --steps 5 --out /tmp/r0 > /dev/null 2>&1
for r in 1 2 3; do
  KILN_CACHE_DIR=$d "${RNN[@]}" --steps 1 --log-every 1 --out /tmp/r1 > /dev/null 2>&1
  echo "no sampler run $r: $(tail -n +2 /tmp/r1/loss.csv | cut -d, -f1,4)"
  LD_PRELOAD=/tmp/libsampler.so SAMPLER_OUT=$OUT/profile-$r.txt KILN_CACHE_DIR=$d \
    "${RNN[@]}" --steps 1 --log-every 1 --out /tmp/r1 > /dev/null 2>&1
  echo "sampled run $r: $(tail -n +2 /tmp/r1/loss.csv | cut -d, -f1,4)"; head -40 $OUT/profile-$r.txt
done
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
