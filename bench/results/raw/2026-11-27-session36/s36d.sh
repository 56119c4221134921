#!/usr/bin/env bash
# Session 36, call 4: scripts/tmp/prewait.cu (standalone CUDA): an LSTM b1 step chain in CUDA
# graphs with PDL edges; invariant work before griddepcontrol.wait, early trigger.
set -uo pipefail
nvcc -O3 -arch=sm_90 scripts/tmp/prewait.cu -o /tmp/prewait || exit 1
for r in 1 2; do /tmp/prewait; done | tee $OUT/prewait.txt
