#!/usr/bin/env bash
# Session 44 call 1 (prepared in session 43): the CUDA suite at session 43's final code (plan_by_tokens, c52b454, ran on the CPU only).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
tail -10 $OUT/suite.txt
rm -f $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
