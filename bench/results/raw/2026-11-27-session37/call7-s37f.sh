#!/usr/bin/env bash
# Session 37 call 7: the CUDA suite at the session's last library code (the plan key's walk
# reading attributes only where an op has them; the launch-thread test's relaxed count), then
# rnn_gpu once more.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; rc=$?
tail -7 $OUT/suite.txt; echo "suite rc $rc, $(( $(date +%s) - t0 )) s"
grep -hE "^\[  FAILED|Failure" $OUT/tests-cuda*.log 2>/dev/null | head -10
left=$(( 540 - ($(date +%s) - t0) ))
if (( left > 60 )); then
  timeout $left build-gpu/bench/rnn_gpu 5000 3 > $OUT/bench-rnn_gpu.md 2>&1; echo "rnn_gpu rc=$?"
  grep -E "^target|^ERROR" $OUT/bench-rnn_gpu.md
fi
echo "total $(( $(date +%s) - t0 )) s"
