#!/usr/bin/env bash
# Session 43 call 6 (the session's last device time): the CUDA suite at 94bcac0 (tokens only find
# the expected plan; call 5's four failures counted graph replays that the first design delayed),
# then the GRU loop alone, tokens on/off in alternating processes (call 4's A/B left it open),
# then issue 20's run if time is left.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
tail -9 $OUT/suite.txt; grep -h "^\[  FAILED" $OUT/tests-cuda*.log 2>/dev/null | head
rm -f $OUT/build.log $OUT/configure.log
llvm_inc=.deps/llvm/include; d=$(ls -d /usr/lib/llvm-*/include 2>/dev/null | sort -V | tail -1); [[ -n $d ]] && llvm_inc=$d
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I$llvm_inc tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
for round in 1 2 3 4 5 6; do for tok in 1 0; do
  KILN_KEY_TOKENS=$tok timeout 30 /tmp/probe gru1 100000 N > /tmp/p.txt 2>&1
  echo "round $round gru1 tokens=$tok: $(grep -E 'us/step' /tmp/p.txt | sed -E 's/ +/ /g' | cut -c1-60)"
done; done | tee $OUT/tokens-ab-gru.txt
left=$(( 500 - ($(date +%s) - t0) ))
echo "A/B done $(( $(date +%s) - t0 )) s; $left s left for natural"
if (( left > 150 )); then
  mkdir -p $OUT/natural
  OUT=$OUT/natural timeout $left scripts/gpu-check natural > $OUT/natural.txt 2>&1
  echo "natural rc $? $(( $(date +%s) - t0 )) s"; grep -E "target|host speed" $OUT/natural.txt | tail -16
  rm -f $OUT/natural/build.log $OUT/natural/configure.log
  for f in $OUT/natural/*; do echo "=== $(basename $f)"; cat "$f"; done > $OUT/natural-all.md
  rm -rf $OUT/natural
fi
echo "total $(( $(date +%s) - t0 )) s"
