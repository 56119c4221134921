#!/usr/bin/env bash
# Session 43 call 2 (prepared in session 42): issue 20's single run at the new default grid (gpu-check natural: rnn_gpu's
# loops, memory and eager bits, the chain and layer norm with named temporaries, transfers, and
# PyTorch beside them).
set -uo pipefail
t0=$(date +%s)
mkdir -p $OUT/natural
OUT=$OUT/natural timeout 560 scripts/gpu-check natural > $OUT/natural.txt 2>&1
echo "natural rc $? $(( $(date +%s) - t0 )) s"; tail -40 $OUT/natural.txt
rm -f $OUT/natural/build.log $OUT/natural/configure.log
for f in $OUT/natural/*; do echo "=== $(basename $f)"; cat "$f"; done > $OUT/natural-all.md
rm -rf $OUT/natural
echo "total $(( $(date +%s) - t0 )) s"
