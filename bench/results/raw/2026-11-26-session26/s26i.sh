#!/usr/bin/env bash
# Session 26 call 9: the CUDA suite at the session's code (gpu-check suite).
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check suite > /tmp/suite.out 2>&1; echo "suite rc=$? $(( $(date +%s) - t0 )) s"
tail -9 /tmp/suite.out
grep -E "^\[  FAILED  \]" $OUT/tests-cuda.log | head -20
grep -E "Standin|stand-in covers" $OUT/tests-cuda.log | head -3
