#!/usr/bin/env bash
# Session 30 call 3: the whole CUDA suite at 31b4156 (merged launches in, off by default; the
# merged-launch tests turn them on themselves).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT/suite scripts/gpu-check suite > /tmp/suite.out 2>&1; rc=$?
echo "gpu-check suite rc=$rc $(( $(date +%s) - t0 )) s"
tail -25 /tmp/suite.out
cp /tmp/suite.out $OUT/
