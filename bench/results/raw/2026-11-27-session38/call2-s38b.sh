#!/usr/bin/env bash
# Session 38 call 2 (11e86b4): issue 20's loops with loop templates beside PyTorch in one call:
# rnn_gpu (templates on), PyTorch's forms, rnn_gpu with templates off (KILN_LOOP_TEMPLATE=0),
# rnn_gpu on again; then the host probe A/B interleaved.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
run_rnn() { # name, KILN_LOOP_TEMPLATE
  KILN_LOOP_TEMPLATE=$2 timeout 150 build-gpu/bench/rnn_gpu 5000 3 > $OUT/bench-rnn_gpu-$1.md 2>&1
  echo "rnn_gpu $1 rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "^target \(issue 20\)|^ERROR|host speed" $OUT/bench-rnn_gpu-$1.md
}
run_rnn run1-T1 1
PYTHONUNBUFFERED=1 timeout 240 python3 bench/torch/rnn_torch.py --steps 3000 --reps 3 --compile-budget 30 > $OUT/bench-torch-rnn.md 2>&1; echo "torch rc=$? $(( $(date +%s) - t0 )) s"
run_rnn run2-T0 0
left=$(( 520 - ($(date +%s) - t0) ))
(( left > 60 )) && run_rnn run3-T1 1
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
for round in 1 2; do for c in seed64 lstm1 gru1; do for t in 1 0; do
  (( $(date +%s) - t0 < 575 )) || break 3
  KILN_LOOP_TEMPLATE=$t timeout 20 /tmp/probe $c 6000 N > /tmp/p.txt 2>&1
  echo "round $round $c T=$t: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c1-80)"
done; done; done | tee $OUT/probe-ab.txt
echo "total $(( $(date +%s) - t0 )) s"
