#!/usr/bin/env bash
# Session 41 call 4: the CUDA suite with elementwise kernels launched one block per 256
# elements/vectors (no 8-blocks-per-SM cap) and background compiles cancelled at exit; then the
# chain and fusion benchmarks (issue 20's 9-op chain and layer norm against copy bandwidth),
# the lab again, and the fuzzers on CUDA for the rest.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; rc=$?
tail -8 $OUT/suite.txt; echo "suite rc $rc, $(( $(date +%s) - t0 )) s"
grep -hE "^\[  FAILED|Failure" $OUT/tests-cuda*.log 2>/dev/null | head -10
cat $OUT/tests-cuda*.log > /tmp/tests-cuda-all.log 2>/dev/null; rm -f $OUT/tests-cuda*.log
grep -hE "^\[  FAILED|Failure" -A6 /tmp/tests-cuda-all.log | head -60 > $OUT/tests-cuda-failures.log
for r in 1 2; do
  for b in chain_gpu fusion_gpu; do
    timeout 60 build-gpu/bench/$b > $OUT/$b-$r.md 2>&1; echo "$b rc $?"
    grep -E "copy of|named|9-op|layer_norm|broadcast|softmax" $OUT/$b-$r.md | cut -c1-150
  done
done
nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -o /tmp/chain_lab tools/elementwise-lab/chain_lab.cu > /dev/null 2>&1
/tmp/chain_lab 67108864 30 > $OUT/chain_lab.md 2>&1; grep -E "copy|^\| [0AG]" $OUT/chain_lab.md
left=$(( 570 - ($(date +%s) - t0) ))
if (( left > 60 )); then
  secs=$((left - 30))
  for i in 0 1 2 3 4 5 6 7; do
    mode=programs; (( i >= 4 )) && mode=loops
    ( s=$(date +%s%N); timeout $((left - 5)) build-gpu/tests/kiln_fuzz --mode $mode --seed $((71000001 + i * 1000000)) --programs 1000000 --seconds $secs --device cuda; r=$?; e=$(date +%s%N); echo "rc $r, wall $(( (e - s) / 1000000 )) ms" ) > /tmp/f-$i.log 2>&1 &
  done
  wait
  for i in 0 1 2 3 4 5 6 7; do echo "== process $i"; cat /tmp/f-$i.log; done > $OUT/fuzz-cuda.log
  grep -hE "kiln_fuzz:|^rc " $OUT/fuzz-cuda.log | cut -c1-130
  grep -h -A3 MISMATCH $OUT/fuzz-cuda.log | head -20
fi
rm -f $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
