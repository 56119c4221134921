#!/usr/bin/env bash
# Session 38 call 1: the CUDA suite with loop templates (18a09ec), then A/B of the templates on
# the loops without eval: the host probe (interleaved 1/0, 3 rounds) and rnn_gpu once each way.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; rc=$?
tail -7 $OUT/suite.txt; echo "suite rc $rc, $(( $(date +%s) - t0 )) s"
grep -hE "^\[  FAILED|Failure" $OUT/tests-cuda*.log 2>/dev/null | head -10
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
for round in 1 2 3; do for c in seed64 lstm1 gru1; do for t in 1 0; do
  KILN_LOOP_TEMPLATE=$t timeout 60 /tmp/probe $c 6000 N > /tmp/p.txt 2>&1
  echo "round $round $c T=$t: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c1-80)"
done; done; done | tee $OUT/probe-ab.txt
echo "probes $(( $(date +%s) - t0 )) s"
for t in 1 0; do
  left=$(( 570 - ($(date +%s) - t0) ))
  (( left > 70 )) || break
  KILN_LOOP_TEMPLATE=$t timeout $left build-gpu/bench/rnn_gpu 5000 3 > $OUT/bench-rnn_gpu-T$t.md 2>&1; echo "rnn_gpu T=$t rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "no eval|^target|^ERROR" $OUT/bench-rnn_gpu-T$t.md | cut -d'|' -f2-6
done
echo "total $(( $(date +%s) - t0 )) s"
