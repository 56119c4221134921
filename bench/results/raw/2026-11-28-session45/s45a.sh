#!/usr/bin/env bash
# Session 45 call 1 (prepared in session 44): the CUDA suite at session 44's final code (the
# sample's --no-cublas and 377bd6d's device probe ran only their own tests on the device), then
# bench/cuda/cold_start.sh: the cold-start table, the seeds' loop beside PyTorch eager, and (new in
# session 44, not yet run) the sample's first training steps with and without cuBLAS beside
# PyTorch's first training steps.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
tail -10 $OUT/suite.txt
timeout $(( 585 - ($(date +%s) - t0) )) bench/cuda/cold_start.sh build-gpu > $OUT/cold-start.md 2>&1
echo "cold start rc $?"; tail -30 $OUT/cold-start.md
rm -f $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
