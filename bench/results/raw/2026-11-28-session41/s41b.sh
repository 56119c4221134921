#!/usr/bin/env bash
# Session 41 call 2: (1) the fuzzer's exit on CUDA after background builds are cancelled at exit
# (call 1: 2 of 8 processes still running 35 s after their summary); (2) issue 20's benchmarks
# on this machine (H200), kiln and PyTorch in the same call.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
lscpu | grep -E "Model name|^CPU\(s\)|MHz" | head -4
for i in 0 1 2 3 4 5 6 7; do
  mode=programs; (( i >= 4 )) && mode=loops
  ( s=$(date +%s%N); timeout 150 build-gpu/tests/kiln_fuzz --mode $mode --seed $((51000001 + i * 1000000)) --programs 1000000 --seconds 80 --device cuda; r=$?; e=$(date +%s%N); echo "rc $r, wall $(( (e - s) / 1000000 )) ms" ) > /tmp/f-$i.log 2>&1 &
done
wait
for i in 0 1 2 3 4 5 6 7; do echo "== process $i"; cat /tmp/f-$i.log; done > $OUT/fuzz-cuda.log
grep -hE "kiln_fuzz:|^rc " $OUT/fuzz-cuda.log | cut -c1-130
grep -h -A3 MISMATCH $OUT/fuzz-cuda.log | head -20
echo "fuzz done $(( $(date +%s) - t0 )) s"
timeout 200 build-gpu/bench/rnn_gpu 5000 3 > $OUT/rnn_gpu.md 2>&1; echo "rnn_gpu rc $? $(( $(date +%s) - t0 )) s"
grep -E "^target|^ERROR|^natural|^compiled" $OUT/rnn_gpu.md
for b in chain_gpu fusion_gpu; do
  timeout 60 build-gpu/bench/$b > $OUT/$b.md 2>&1; echo "$b rc $?"
  grep -E "named|9-op|layer_norm" $OUT/$b.md | cut -c1-150
done
echo "kiln done $(( $(date +%s) - t0 )) s"
left=$(( 585 - ($(date +%s) - t0) ))
PYTHONUNBUFFERED=1 timeout $left python3 bench/torch/rnn_torch.py --steps 3000 --reps 3 --compile-budget 60 > $OUT/rnn_torch.md 2>&1
echo "torch rc $? $(( $(date +%s) - t0 )) s"
grep -E "^\| " $OUT/rnn_torch.md | cut -c1-140 | head -40
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
