#!/usr/bin/env bash
# Session 31 call 3: the whole CUDA suite at HEAD (gpu-check suite), then the seed loop's stats per
# eval interval (merge_probe with stats: why no eval is slower than an eval every 16 steps).
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc=$? $(( $(date +%s) - t0 )) s"
tail -12 $OUT/suite.txt
g++ -std=c++20 -O2 -Iinclude -Ibuild-gpu/generated/include scripts/tmp/merge_probe.cpp -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/merge_probe || exit 1
(( $(date +%s) - t0 < 540 )) && KILN_COMPILE=sync timeout 50 /tmp/merge_probe 4096 64 2>&1 | tee $OUT/probe.txt
echo "total $(( $(date +%s) - t0 )) s"
