#!/usr/bin/env bash
# Session 43 call 5: the CUDA suite at the plan-key tokens (294cbe4 and after).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
tail -10 $OUT/suite.txt
rm -f $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
