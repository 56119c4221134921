#!/usr/bin/env bash
# Session 45 call 9: gpu-check suite at the session's final code.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
tail -10 $OUT/suite.txt
rm -f $OUT/build.log $OUT/configure.log
