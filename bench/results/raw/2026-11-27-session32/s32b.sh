#!/usr/bin/env bash
# Session 32 call 2: cublas_probe2 modes in fresh processes, 3 rounds.
set -uo pipefail
nvcc -std=c++17 -O2 scripts/tmp/cublas_probe2.cpp -lcublasLt -lcublas -o /tmp/cbp2 || exit 1
/tmp/cbp2 seq > /dev/null # the loader's cold files
for r in 1 2 3; do
  for m in seq par1 parset parall store load; do /tmp/cbp2 $m; done
done 2>&1 | tee $OUT/cublas2.txt
