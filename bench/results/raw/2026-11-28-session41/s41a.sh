#!/usr/bin/env bash
# Session 41 call 1: the CUDA suite at HEAD (split_reductions, cached CSE kind in loop templates
# were checked on the CPU only), then the fuzzers on CUDA (programs and loops) for the rest.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; rc=$?
tail -8 $OUT/suite.txt; echo "suite rc $rc, $(( $(date +%s) - t0 )) s"
grep -hE "^\[  FAILED|Failure" $OUT/tests-cuda*.log 2>/dev/null | head -10
grep -hE "AnAccumulatorOfSoftmaxes|ARepeatingTraining" $OUT/tests-cuda*.log | grep -E "OK|FAILED" | head -5
cat $OUT/tests-cuda*.log > /tmp/tests-cuda-all.log 2>/dev/null; rm -f $OUT/tests-cuda*.log
grep -hE "^\[  FAILED|Failure" -A6 /tmp/tests-cuda-all.log | head -60 > $OUT/tests-cuda-failures.log
left=$(( 570 - ($(date +%s) - t0) ))
if (( left > 60 )); then
  secs=$((left - 40))
  for i in 0 1 2 3 4 5 6 7; do
    mode=programs; (( i >= 4 )) && mode=loops
    ( s=$(date +%s.%N); timeout $((left - 5)) build-gpu/tests/kiln_fuzz --mode $mode --seed $((41000001 + i * 1000000)) --programs 1000000 --seconds $secs --device cuda; r=$?; echo "rc $r, $(echo "$(date +%s.%N) - $s" | bc) s wall" ) > /tmp/f-$i.log 2>&1 &
  done
  wait
  for i in 0 1 2 3 4 5 6 7; do echo "== process $i"; cat /tmp/f-$i.log; done > $OUT/fuzz-cuda.log
  grep -hE "kiln_fuzz:|^rc " $OUT/fuzz-cuda.log | cut -c1-160
  grep -h -A3 MISMATCH $OUT/fuzz-cuda.log | head -20
fi
rm -f $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
