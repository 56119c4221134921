#!/usr/bin/env bash
# Session 35 call 13: does the host speed probe (bench::host_speed_us) follow the seed loop's
# host time between processes? rnn_gpu "seed d=64" in four processes.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
for p in 1 2 3 4; do
  timeout 40 build-gpu/bench/rnn_gpu 2000 3 "seed d=64" > /tmp/r.md 2>&1
  echo "p$p: $(grep -E "host speed probe" /tmp/r.md | sed 's/ (.*//' | tr '\n' ';') $(grep -E "^\| seed d=64 \| kiln GPU lazy, CUDA graphs(, no eval in the loop)? \| [0-9]+ \|" /tmp/r.md | cut -d'|' -f5,10 | tr '\n' ';')"
done | tee $OUT/probe.txt
echo "total $(( $(date +%s) - t0 )) s"
