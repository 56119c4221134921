#!/usr/bin/env bash
# Session 35 call 10: does rnn_gpu's compile mode (now sync) change its timed rows? LSTM and GRU
# at batch 1, KILN_COMPILE=sync against =background, alternated, three rounds.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
for r in 1 2 3; do
  for m in sync background; do
    for c in "LSTM batch 1" "GRU batch 1"; do
      KILN_COMPILE=$m timeout 60 build-gpu/bench/rnn_gpu 3000 3 "$c" > /tmp/r.md 2>&1
      echo "r$r $m $c rc=$?: $(grep -E "CUDA graphs \||no eval in the loop \|" /tmp/r.md | grep -v "| 1.00 |\|| 0\.[0-9][0-9] | 0\.[0-9]\|fixed" | grep -E "^\| $c \|" | cut -d'|' -f3,5,6,10 | tr '\n' ';')"
    done
  done
done | tee $OUT/mode-ab.txt
echo "total $(( $(date +%s) - t0 )) s"
