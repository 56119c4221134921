#!/usr/bin/env bash
# Session 44 call 2 (prepared in session 43): issue 20's run again (gpu-check natural), as a second
# run at the final code; the GRU loop moves with the host's phase (3.39-5.61 us a step in session 43).
set -uo pipefail
t0=$(date +%s)
mkdir -p $OUT/natural
OUT=$OUT/natural timeout 560 scripts/gpu-check natural > $OUT/natural.txt 2>&1
echo "natural rc $? $(( $(date +%s) - t0 )) s"; tail -40 $OUT/natural.txt
rm -f $OUT/natural/build.log $OUT/natural/configure.log
for f in $OUT/natural/*; do echo "=== $(basename $f)"; cat "$f"; done > $OUT/natural-all.md
rm -rf $OUT/natural
echo "total $(( $(date +%s) - t0 )) s"
