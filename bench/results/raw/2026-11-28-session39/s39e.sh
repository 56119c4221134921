#!/usr/bin/env bash
# Session 39 call 6: the CUDA suite at the session's last library code (the kernel builder's
# split_off and index maps; fa9983c), then the loop fuzzer on CUDA for what time is left.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; rc=$?
tail -7 $OUT/suite.txt; echo "suite rc $rc, $(( $(date +%s) - t0 )) s"
grep -hE "^\[  FAILED|Failure" $OUT/tests-cuda*.log 2>/dev/null | head -10
grep -hE "FusionPatterns.(Values|AValueReadThroughMany|AKernelPast)" $OUT/tests-cuda*.log | grep -E "OK|FAILED" | head -10
left=$(( 425 - ($(date +%s) - t0) ))
if (( left > 20 )); then
  for i in 0 1 2 3 4 5 6 7; do
    build-gpu/tests/kiln_fuzz --mode loops --seed $((10000001 + i * 1000000)) --programs 1000000 --seconds $((left - 10)) --device cuda > /tmp/fl-$i.log 2>&1 &
  done
  wait
  cat /tmp/fl-*.log > $OUT/fuzz-cuda-loops.log
  grep -h "kiln_fuzz:" $OUT/fuzz-cuda-loops.log | cut -c1-150
  grep -h -A3 MISMATCH $OUT/fuzz-cuda-loops.log | head -20
fi
rm -f $OUT/build.log $OUT/configure.log $OUT/dlpack.log $OUT/exit-check.log $OUT/exit-compiling-check.log
echo "total $(( $(date +%s) - t0 )) s"
