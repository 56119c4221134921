#!/usr/bin/env bash
# Session 45 call 8: (1) exits during cuBLAS's set-up: 40 sample processes of 1 step each on a
# warm disk cache (they exit ~35 ms after the trainer starts, while the f32 set-up, 80-135 ms,
# still runs), counting failures; (2) do two runs with the same seed give the same losses, by
# default and with KILN_CUBLAS=wait (200 steps, the train loss every 10).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail -30 $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
RNN=(build-gpu/samples/kiln-rnn --device cuda --val-every 100000 --checkpoint-every 1000000)
d=/tmp/kc-warm; rm -rf $d; mkdir -p $d
KILN_CACHE_DIR=$d "${RNN[@]}" --steps 50 --out $d/o0 > /dev/null 2>&1
fails=0
for r in $(seq 40); do
  KILN_CACHE_DIR=$d "${RNN[@]}" --steps 1 --log-every 1 --out $d/o1 > $d/log 2>&1; rc=$?
  [[ $rc -ne 0 ]] && { fails=$((fails + 1)); echo "run $r rc $rc"; tail -3 $d/log; }
done
echo "exits during the set-up: $fails of 40 failed; last first step $(tail -1 $d/o1/loss.csv)"
for t in default KILN_CUBLAS=wait; do
  env_t=(X=1); [[ $t != default ]] && env_t=("$t")
  for r in 1 2; do
    env "${env_t[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 200 --log-every 10 --out $d/s$r > /dev/null 2>&1 || echo "failed $t $r"
  done
  n=$(paste -d, <(cut -d, -f2 $d/s1/loss.csv) <(cut -d, -f2 $d/s2/loss.csv) | tail -n +2 | awk -F, '$1 != $2' | wc -l)
  echo "$t: $n of $(( $(wc -l < $d/s1/loss.csv) - 1 )) logged losses differ between two runs; step 10: $(sed -n 2p $d/s1/loss.csv | cut -d, -f2) vs $(sed -n 2p $d/s2/loss.csv | cut -d, -f2); step 200: $(tail -1 $d/s1/loss.csv | cut -d, -f2) vs $(tail -1 $d/s2/loss.csv | cut -d, -f2)"
done
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
