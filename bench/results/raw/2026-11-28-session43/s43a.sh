#!/usr/bin/env bash
# Session 43 call 1 (prepared in session 42): the CUDA suite at session 42's final code (the
# sample-exit gate, segments back at one vector a thread), then, with the machine warm, call 2
# runs s43b.sh (issue 20's single run).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
tail -10 $OUT/suite.txt
rm -f $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
