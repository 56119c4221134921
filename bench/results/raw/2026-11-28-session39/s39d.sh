#!/usr/bin/env bash
# Session 39 call 5: the CUDA suite at the kernel builder's index-map change (26a7c18) and the
# loop fuzzer (aca8afa), then the fuzzer's loops and programs on CUDA, 8 processes each.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; rc=$?
tail -7 $OUT/suite.txt; echo "suite rc $rc, $(( $(date +%s) - t0 )) s"
grep -hE "^\[  FAILED|Failure" $OUT/tests-cuda*.log 2>/dev/null | head -10
grep -hE "FusionPatterns.(Values|AValueReadThroughMany)|LoopTemplate" $OUT/tests-cuda*.log | grep -E "OK|FAILED" | head -10
fuzz() { # name seconds args
  local name=$1 secs=$2; shift 2
  for i in 0 1 2 3 4 5 6 7; do
    build-gpu/tests/kiln_fuzz --seed $((1 + i * 1000000)) --programs 1000000 --seconds $secs "$@" > /tmp/f-$name-$i.log 2>&1 &
  done
  wait
  cat /tmp/f-$name-*.log > $OUT/fuzz-$name.log
  grep -h "kiln_fuzz:" $OUT/fuzz-$name.log | cut -c1-150
  grep -h -A3 MISMATCH $OUT/fuzz-$name.log | head -20
}
fuzz cuda-loops 90 --device cuda --mode loops
fuzz cuda 60 --device cuda
rm -f $OUT/build.log $OUT/configure.log $OUT/dlpack.log $OUT/exit-check.log $OUT/exit-compiling-check.log
echo "total $(( $(date +%s) - t0 )) s"
